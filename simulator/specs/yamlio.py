"""Strict YAML loading: duplicate keys and syntax errors become one-line ConfigErrors naming the file.

Parsing uses libyaml (``yaml.CSafeLoader``, ~10× faster than the pure-Python parser) when PyYAML was built with it,
and the pure-Python ``yaml.SafeLoader`` otherwise; both give the same data and the same messages.

Numbers: YAML 1.1 (PyYAML's schema) reads ``3.35e12`` and ``1e30`` as *strings*, because its float pattern wants a
dot and a signed exponent (``3.35e+12``). Hardware and model files are written by people who write ``3.35e12``, so
the loader also resolves scientific notation without a dot or without an exponent sign to a float (as YAML 1.2's
core schema does). Plain integers stay integers; quoted values stay strings.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..errors import ConfigError

# Scientific notation that the YAML 1.1 float pattern misses: an exponent without a sign (3.35e12, 1.5E9) or a
# mantissa without a dot (1e30, -2E-3). Underscores are allowed as in YAML 1.1 numbers.
_SCI_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


def _construct_mapping(loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key (a list or mapping used as a key): the constructor reports it
            break
        if duplicate:
            mark = key_node.start_mark
            raise ConfigError(loader.where, str(key), f"appears twice (line {mark.line + 1})",
                              "keep one of the two entries")
        seen[key] = True
    return loader.construct_mapping(node, deep=deep)


def _strict(base: type) -> type:
    """``base`` (a safe loader) that refuses duplicate keys and reads 3.35e12 as a number."""
    cls = type(f"Strict{base.__name__}", (base,), {})
    cls.add_implicit_resolver("tag:yaml.org,2002:float", _SCI_FLOAT, list("-+0123456789."))
    cls.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    return cls


class _Dumper(yaml.SafeDumper):
    """SafeDumper that quotes strings this loader would read as numbers (``'1e5'``), so files round-trip."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", _SCI_FLOAT, list("-+0123456789."))


def dump_yaml(obj: Any, stream=None, **kwargs) -> Any:
    """``yaml.safe_dump`` whose output :func:`load_yaml_text` reads back as ``obj`` (strings like ``1e5`` quoted)."""
    return yaml.dump(obj, stream, Dumper=_Dumper, **kwargs)


PY_LOADER = _strict(yaml.SafeLoader)
C_LOADER = _strict(yaml.CSafeLoader) if getattr(yaml, "__with_libyaml__", False) else None
LIBYAML = C_LOADER is not None


def load_yaml_text(text: str, where: str, *, loader_class: type | None = None) -> Any:
    """Parse ``text``; errors name ``where`` (a file name or a bundled ``kind/name.yaml``). ``loader_class`` (tests):
    ``PY_LOADER`` or ``C_LOADER``; by default libyaml's when PyYAML has it."""
    try:
        loader = (loader_class or C_LOADER or PY_LOADER)(text)
        loader.where = where
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(where, "", f"is not valid YAML ({line}{problem})",
                          "fix the syntax (indentation, colons, quotes)") from None


def load_yaml_file(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(p), "", "does not exist", "check the path or use a bundled name (see `list`)") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise ConfigError(str(p), "", f"cannot be read ({type(exc).__name__})",
                          "pass a readable UTF-8 YAML file") from None
    return load_yaml_text(text, str(p))
