"""Text-level editing of a hand-edited profile's YAML blocks (:mod:`.profile_io` writes calibrations with them):
nested lines rendered from dotted paths, the dotted path of every line, a ``sources:`` entry set, and the hand-set
leaves of a block a refit keeps."""

from __future__ import annotations

import re


def render(values: dict[str, str], strip: str, indent: int) -> list[str]:
    """Nested block YAML lines of ``{dotted path: flow text}`` (paths starting with ``strip``)."""
    tree: dict = {}
    for path, text in values.items():
        node = tree
        parts = path[len(strip):].split(".")
        for k in parts[:-1]:
            node = node.setdefault(k, {})
        node[parts[-1]] = text

    def emit(node, depth):
        for k, v in node.items():
            pad = " " * (indent + 2 * depth)
            if isinstance(v, dict):
                yield f"{pad}{k}:\n"
                yield from emit(v, depth + 1)
            else:
                yield f"{pad}{k}: {v}\n"
    return list(emit(tree, 0))


def set_source(lines: list[str], key: str, text: str) -> None:
    """Set (or add) the ``sources:`` entry ``key`` of a profile's lines."""
    for i, line in enumerate(lines):
        if line.startswith(f"  {key}:"):
            lines[i] = f"  {key}: \"{text}\"\n"
            return
    j = lines.index("sources:\n") + 1
    lines.insert(j, f"  {key}: \"{text}\"\n")


_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-]+):(?P<rest>.*)$")


def paths(lines: list[str]):
    """Yield ``(index, dotted path, text after the colon)`` for every ``key: value`` line of a block-style YAML file
    whose nested values are flow mappings or scalars on one line."""
    stack: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        m = _LINE.match(line)
        if not m or line.lstrip().startswith("#"):
            continue
        indent = len(m["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [m["key"]])
        rest = m["rest"].strip()
        if rest == "" or rest.startswith("#"):
            stack.append((indent, m["key"]))
        yield i, path, rest


def hand_set(block: list[str], key: str) -> dict[str, str]:
    """The leaves of an engine block (``{dotted path: flow text}``, paths from ``kernels.``) that a calibration citing
    ``key`` keeps: those under a node with no value of that source (a kernel copied by hand, a stated round band),
    graphs aside."""
    leaves, fitted = {}, set()
    for _, path, text in paths(block):
        path = path.partition(".")[2]  # the engine's name dropped
        parent = path.rpartition(".")[0]
        if f"source: {key}" in text:
            fitted.add(parent)
        elif text and not text.startswith("#") and not path.startswith("kernels.graphs"):
            leaves[path] = (parent, text)
    return {p: text for p, (parent, text) in leaves.items() if parent not in fitted}
