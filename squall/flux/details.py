"""Flux's ``printTopologyInfo``: what ``squall local|jar FILE.yaml`` prints before it runs the
topology (unless ``-q``), and all that ``--dry-run`` does."""

from __future__ import annotations

from .builder import FluxTopology


def describe(flux: FluxTopology, name: str) -> str:
    """The topology's name, spouts and bolts (id, parallelism, class) and streams, as Flux shows them."""
    definition = flux.definition
    lines = ["---------- TOPOLOGY DETAILS ----------", f"Topology Name: {name}"]
    if definition.topology_source is not None:
        source = definition.topology_source
        lines.append(f"Topology Source: {source.class_name}.{source.method_name}")
        lines.append("------------- COMPONENTS -------------")
        for cid, spec in sorted(flux.topology.components.items()):
            lines.append(f"{cid} [{spec.parallelism}] ({spec.kind}: {type(spec.obj).__name__})")
    else:
        lines.append("--------------- SPOUTS ---------------")
        lines += [f"{s.id} [{s.parallelism}] ({s.class_name})" for s in definition.spouts.values()]
        lines.append("---------------- BOLTS ---------------")
        lines += [f"{b.id} [{b.parallelism}] ({b.class_name})" for b in definition.bolts.values()]
        lines.append("--------------- STREAMS ---------------")
        for s in definition.streams:
            on = f" [{s.grouping.stream_id}]" if s.grouping.stream_id else ""
            args = f"({', '.join(s.grouping.args)})" if s.grouping.args else ""
            label = f"  # {s.name}" if s.name else ""
            lines.append(f"{s.source}{on} --{s.grouping.type}{args}--> {s.target}{label}")
    lines.append("--------------------------------------")
    return "\n".join(lines)
