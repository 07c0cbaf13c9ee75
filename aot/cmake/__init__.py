"""CMake support for scikit-build-core projects: ``Findaot.cmake``.

This folder is registered as a ``cmake.module`` entry point, so scikit-build-core adds it to
``CMAKE_MODULE_PATH`` in every project built where aot is installed; ``find_package(aot REQUIRED)`` then
defines ``aot_add_artifacts()``.
"""
