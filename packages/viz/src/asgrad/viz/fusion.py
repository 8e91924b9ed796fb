"""GPU fusion groups of a schedule, when ``asgrad-gpu`` is installed (no device needed).

A group is a node the GPU backend launches and the nodes it inlines into that launch
(`asgrad.gpu.plan.inlined_nodes`), named after the launched node; only groups
of more than one node are returned.
"""

from __future__ import annotations

from asgrad.tensor import Node, Tensor
from asgrad.tensor.ir.schedule import Schedule, make_schedule

__all__ = ["fusion_groups"]


def fusion_groups(schedule: Schedule | None, roots: list[Node]) -> dict[str, str]:
    """``{node name: group name}`` for the schedule (or one made for ``roots``)."""
    try:
        from asgrad.gpu.plan import inlined_nodes, users_of
    except ImportError:  # the GPU package is optional
        return {}
    if schedule is None:
        if not roots:
            return {}
        schedule = make_schedule([Tensor(r) for r in roots])
    users = users_of(schedule)
    inlined = inlined_nodes(schedule, users, schedule.infer_types({}))
    groups: dict[str, str] = {}
    for node in reversed(schedule.nodes):
        if node.id in inlined:
            continue
        members = [node]
        stack = [i for i in node.inputs if i.id in inlined]
        while stack:
            m = stack.pop()
            if m.name not in groups and m not in members:
                members.append(m)
                stack.extend(i for i in m.inputs if i.id in inlined)
        if len(members) > 1:
            for m in members:
                groups.setdefault(m.name, node.name)
    return groups
