"""Graphs in and out of files and text: the graph file format and printing.

Holds ``graph_file`` (the versioned JSON graph file), ``graph_values`` (its attribute
values) and ``printing`` (text dumps and Graphviz DOT).

May import: `errors`, `ir`,
`loops` (a graph file holds loop bodies) and itself.
"""
