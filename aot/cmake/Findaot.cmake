# find_package(aot REQUIRED): aot's CMake support for scikit-build-core projects.
#
# scikit-build-core puts this folder on CMAKE_MODULE_PATH through aot's "cmake.module" entry point, so a
# downstream CMakeLists.txt needs two lines:
#
#   find_package(aot REQUIRED)
#   aot_add_artifacts()            # [ARTIFACTS <prebuilt dir>] [SM <list>] [ALLOW_PARTIAL] [PROJECT <dir>]
#
# aot_add_artifacts() runs `python -m aot bundle` (the same build + `verify --for-wheel` as the CLI, driven
# by [tool.aot] in pyproject.toml) at configure time and installs manifest.json, its hit-index.json, the *.aot
# artifacts and aot-package.json into <package>/<folder>/ of the wheel. Nothing else (no reports, no host paths).
find_package(Python COMPONENTS Interpreter REQUIRED)
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c "import aot; print(aot.__version__)"
  OUTPUT_VARIABLE aot_VERSION RESULT_VARIABLE _aot_rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT _aot_rc EQUAL 0)
  unset(aot_VERSION)
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(aot REQUIRED_VARS aot_VERSION VERSION_VAR aot_VERSION)

function(aot_add_artifacts)
  cmake_parse_arguments(ARG "ALLOW_PARTIAL" "PROJECT;ARTIFACTS;SM" "" ${ARGN})
  if(NOT ARG_PROJECT)
    set(ARG_PROJECT "${CMAKE_SOURCE_DIR}")
  endif()
  set(stage "${CMAKE_BINARY_DIR}/aot-bundle")
  # The build output stays in <project>/build/aot (aot bundle's default, as with the hatchling hook): an
  # unchanged matrix rebuilds nothing, even where scikit-build-core's build directory is a new temp dir.
  set(cmd "${Python_EXECUTABLE}" -m aot bundle --project "${ARG_PROJECT}" --out-root "${stage}")
  if(ARG_ARTIFACTS)
    list(APPEND cmd --artifacts "${ARG_ARTIFACTS}")
  endif()
  if(ARG_SM)
    list(APPEND cmd --sm "${ARG_SM}")
  endif()
  if(ARG_ALLOW_PARTIAL)
    list(APPEND cmd --allow-partial)
  endif()
  file(REMOVE_RECURSE "${stage}")
  message(STATUS "aot: bundling the artifacts of ${ARG_PROJECT} (aot ${aot_VERSION})")
  # stderr is captured so that a failure ends in aot's own one line ("aot: error: ...") as the fatal error,
  # not in a generic one pointing above; the leading space keeps CMake from re-wrapping it.
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc ERROR_VARIABLE err)
  string(REGEX MATCH "aot: error: [^\n]*" line "${err}")
  string(REGEX REPLACE "(^|\n)aot: error: [^\n]*" "" rest "${err}")
  string(STRIP "${rest}" rest)
  if(rest)
    message(NOTICE "${rest}")  # warnings and the progress of the build, as aot printed them
  endif()
  if(NOT rc EQUAL 0)
    if(NOT line)
      set(line "aot: error: 'python -m aot bundle' failed (exit ${rc})")
    endif()
    message(FATAL_ERROR " ${line}")
  endif()
  install(DIRECTORY "${stage}/" DESTINATION ".")
endfunction()
