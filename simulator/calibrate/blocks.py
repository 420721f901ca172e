"""Text-level editing of a hand-edited profile's YAML blocks (:mod:`.profile_io` writes calibrations with them):
nested lines rendered from dotted paths, a ``sources:`` entry set, and the hand-set leaves of a block a refit keeps."""

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


def hand_set(block: list[str], key: str) -> dict[str, str]:
    """The leaves of an engine block (``{dotted path: flow text}``) that a calibration citing ``key`` keeps: those
    under a node with no value of that source (a kernel copied by hand, a stated round band), graphs aside."""
    leaves, fitted, path = {}, set(), []
    for line in block:
        m = re.match(r"^( {4,})([A-Za-z0-9_]+):(.*)$", line.rstrip("\n"))
        if m:
            path[(len(m.group(1)) - 4) // 2:] = [m.group(2)]
            text, parent = m.group(3).strip(), ".".join(path[:-1])
            if f"source: {key}" in text:
                fitted.add(parent)
            elif text and path[:2] != ["kernels", "graphs"]:
                leaves[".".join(path)] = (parent, text)
    return {p: text for p, (parent, text) in leaves.items() if parent not in fitted}
