"""The build matrix's YAML, read with bounds: :func:`load_yaml` gives mappings that remember their lines.

Split from :mod:`aot.build.matrix` (which validates what this reads): a hostile file is refused from the
event stream before anything is constructed (:func:`_prescan`), and every mapping and list keeps the
line it starts on, so each error can name its line.
"""

from __future__ import annotations

from typing import Any

import yaml

from ..core.errors import MatrixError
from ..core.text import MAX_SPECS, MAX_TEXT_LEN, _text_problem, short

#: Deepest nesting of YAML collections (a matrix needs 5: top, section, entry, options, define_macro).
MAX_DEPTH = 16
#: Most entries in one YAML list or mapping, and most values in the whole file.
MAX_ENTRIES = MAX_SPECS
MAX_VALUES = 32 * MAX_SPECS

#: The fast (libyaml) parser when PyYAML has it; the checks below hold for either.
_BaseLoader = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader
_START = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_END = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _prescan(text: str, name: str) -> None:
    """Refuse, from the event stream and before anything is built: anchors and aliases (an alias bomb
    expands to billions of values), nesting deeper than :data:`MAX_DEPTH`, collections and files with too
    many values, and scalars too long or holding NUL or lone surrogates. Stops at the first problem, so
    a hostile file costs time proportional to where the problem is, not to its size."""
    depth = values = 0
    sizes: list[int] = []
    for event in yaml.parse(text, Loader=_BaseLoader):
        line = event.start_mark.line + 1 if event.start_mark else 0
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise MatrixError(f"{name}:{line}: YAML anchors and aliases are not allowed (write each value out)")
        if isinstance(event, _END):
            depth -= 1
            sizes.pop()
            continue
        if not isinstance(event, (yaml.ScalarEvent, *_START)):
            continue
        values += 1
        if sizes:
            sizes[-1] -= 1
            if sizes[-1] < 0:
                raise MatrixError(f"{name}:{line}: a list or mapping with more than {MAX_ENTRIES} entries")
        if values > MAX_VALUES:
            raise MatrixError(f"{name}:{line}: the matrix holds more than {MAX_VALUES} values")
        if isinstance(event, yaml.ScalarEvent):
            problem = _text_problem(event.value, MAX_TEXT_LEN)
            if problem:
                raise MatrixError(f"{name}:{line}: a value {problem}")
        else:
            depth += 1  # room left in this collection (a mapping's keys and values both count)
            sizes.append(2 * MAX_ENTRIES if isinstance(event, yaml.MappingStartEvent) else MAX_ENTRIES)
            if depth > MAX_DEPTH:
                raise MatrixError(f"{name}:{line}: nesting deeper than {MAX_DEPTH} levels")


class Map(dict):
    """A mapping that remembers the line of each key (1-based) and of itself."""

    line: int = 0
    key_lines: dict


class Seq(list):
    line: int = 0


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    name: str = ""


def _construct_map(loader: _Loader, node: yaml.MappingNode) -> Map:
    m = Map()
    m.line = node.start_mark.line + 1
    m.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) or key is None:
            raise MatrixError(f"{loader.name}:{key_node.start_mark.line + 1}: a mapping key must be a plain "
                              f"name, not {type(key).__name__}")
        if key in m:
            raise MatrixError(f"{loader.name}:{key_node.start_mark.line + 1}: duplicate key {short(key)}")
        m[key] = loader.construct_object(value_node, deep=True)
        m.key_lines[key] = value_node.start_mark.line + 1
    return m


def _construct_seq(loader: _Loader, node: yaml.SequenceNode) -> Seq:
    s = Seq(loader.construct_object(n, deep=True) for n in node.value)
    s.line = node.start_mark.line + 1
    return s


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int:
    try:
        return loader.construct_yaml_int(node)
    except ValueError:  # over Python's 4300-digit int conversion limit
        raise MatrixError(f"{loader.name}:{node.start_mark.line + 1}: integer {short(node.value)} is too "
                          f"large") from None


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_map)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_seq)
_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def load_yaml(text: str, name: str) -> Any:
    """The document, its mappings as :class:`Map` and lists as :class:`Seq`; else one-line :class:`MatrixError`."""
    try:
        _prescan(text, name)
        loader = _Loader(text)
        loader.name = name
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except MatrixError:
        raise
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        if "maximum nesting depth" in str(e):  # libyaml >= 0.2.5 (PyYAML 6.0.4) scans ahead of _prescan
            raise MatrixError(f"{name}:{line}: nesting deeper than {MAX_DEPTH} levels") from None
        raise MatrixError(f"{name}:{line}: not valid YAML: {str(getattr(e, 'problem', None) or e)[:200]}") from None
    except (ValueError, TypeError, RecursionError, MemoryError) as e:  # a constructor refusing a value
        raise MatrixError(f"{name}:0: not a usable YAML document: {type(e).__name__}: {str(e)[:200]}") from None
