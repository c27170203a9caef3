"""Manifest ↔ logical graph, with every problem reported by its manifest path.

``validate_manifest`` collects all problems (schema, unknown operations, bad expressions and
function references, missing serdes, type mismatches, dangling stream references) instead of
stopping at the first. ``to_manifest_yaml`` writes a graph back out so that loading it gives an
equal graph: streams are emitted in node order, a step is appended to the current stream only
when it continues it, and anything else starts a new stream ``from`` the stream it continues.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import pydantic
import yaml

from streamapp.runtime import errors, serdes
from streamapp.runtime.expressions import check
from streamapp.runtime.manifest import models
from streamapp.runtime.topology import graph

__all__ = ["build_topology", "load_manifest", "to_manifest_yaml", "validate_manifest"]

_LOGIC_OPS = ("filter", "filterNot", "mapValues", "flatMapValues", "selectKey", "flatMap", "peek")
_TERMINAL = ("to", "print", "split")
_OPS = tuple(models.Step.model_fields[n].alias or n for n in models.Step.model_fields)


def _text(source: str | pathlib.Path) -> str:
    if isinstance(source, pathlib.Path):
        return source.read_text()
    return source


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_problems(err: pydantic.ValidationError) -> list[errors.Problem]:
    problems = []
    seen = set()
    for item in err.errors():
        loc = tuple(
            p
            for p in item["loc"]
            if not (
                isinstance(p, str)
                and (
                    "[" in p
                    or p
                    in (
                        "str",
                        "SerdeObject",
                        "LogicObject",
                        "ToSpec",
                        "literal['string','bytes','int','long','double','json']",
                    )
                )
            )
        )
        if (item["type"] == "extra_forbidden" and len(loc) >= 2 and loc[-2] == "steps") or (
            item["type"] == "extra_forbidden" and "steps" in loc and isinstance(loc[-2], int)
        ):
            message = f"unknown operation '{loc[-1]}' (expected one of {', '.join(_OPS)})"
        elif item["type"] == "extra_forbidden":
            message = f"unknown field '{loc[-1]}'"
        elif item["type"] == "missing":
            message = "required field is missing"
        else:
            message = item["msg"].removeprefix("Value error, ")
        # A union (e.g. a serde name or object) fails once per alternative: the first says it best.
        key = _path(loc)
        if key not in seen:
            seen.add(key)
            problems.append(errors.Problem(_path(loc), message))
    # A union reports one error per alternative; keep the most specific ones per path.
    return _dedupe(problems)


def _dedupe(problems: list[errors.Problem]) -> list[errors.Problem]:
    paths = {p.path for p in problems}
    return [
        p
        for p in problems
        if not any(o != p.path and o.startswith(p.path + ".") for o in paths)
        or "unknown operation" in p.message
    ]


def _parse(text: str) -> tuple[models.StreamApp | None, list[errors.Problem]]:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        return None, [errors.Problem("", f"not valid YAML at {where}: {getattr(err, 'problem', err)}")]
    if not isinstance(raw, Mapping):
        return None, [
            errors.Problem("", "a manifest is a YAML mapping with apiVersion, kind, metadata and spec")
        ]
    try:
        return models.StreamApp.model_validate(raw), []
    except pydantic.ValidationError as err:
        return None, _schema_problems(err)


def validate_manifest(source: str | pathlib.Path) -> list[errors.Problem]:
    """Every problem of the manifest, by path; empty when it is valid."""
    app, problems = _parse(_text(source))
    if app is None:
        return problems
    return _Converter(app).run()[1]


def load_manifest(source: str | pathlib.Path) -> models.StreamApp:
    """The parsed manifest; raises :class:`errors.ManifestError` listing every problem."""
    app, problems = _parse(_text(source))
    if app is None:
        raise errors.ManifestError(problems)
    _, problems = _Converter(app).run()
    if problems:
        raise errors.ManifestError(problems)
    return app


def build_topology(app: models.StreamApp) -> graph.Topology:
    topology, problems = _Converter(app).run()
    if problems or topology is None:
        raise errors.ManifestError(problems)
    return topology


def _serde(spec: models.SerdeSpec | None) -> serdes.Serde | None:
    if spec is None:
        return None
    if isinstance(spec, models.SerdeObject):
        return serdes.Serde(spec.name, spec.schema_)
    return serdes.Serde(spec)


def _logic(spec: models.LogicSpec, *, returns: str | None = None) -> dict[str, Any]:
    if isinstance(spec, str):
        return {"expr": spec}
    out: dict[str, Any] = {}
    if spec.expr is not None:
        out["expr"] = spec.expr
    if spec.function is not None:
        out["function"] = spec.function
        if spec.returns or returns:
            out["returns"] = spec.returns or returns
    return out


class _Converter:
    """Walks the manifest's streams in order, building nodes and collecting problems."""

    def __init__(self, app: models.StreamApp) -> None:
        self.app = app
        self.topo = app.spec.topology
        self.nodes: list[graph.Node] = []
        self.problems: list[errors.Problem] = []
        self.tails: dict[str, tuple[str, serdes.Serde | None]] = {}  # stream name → (tail node, value serde)

    def problem(self, path: str, message: str) -> None:
        self.problems.append(errors.Problem(path, message))

    def add(self, op: str, parents: tuple[str, ...], params: Mapping[str, Any], path: str) -> str:
        name = graph.node_name(op, len(self.nodes))
        self.nodes.append(graph.Node(name=name, op=op, parents=parents, params=dict(params), path=path))
        return name

    def run(self) -> tuple[graph.Topology | None, list[errors.Problem]]:
        defaults = self.topo.defaults
        default_key, default_value = _serde(defaults.key_serde), _serde(defaults.value_serde)
        for i, stream in enumerate(self.topo.streams):
            path = f"spec.topology.streams[{i}]"
            tail, value_serde = self._start(stream, path, default_key, default_value)
            if tail is None:
                continue
            ended = False
            for j, step in enumerate(stream.steps):
                step_path = f"{path}.steps[{j}]"
                if ended:
                    self.problem(
                        step_path,
                        "nothing can follow to, print or split in the same stream; "
                        "start a new stream from a split branch instead",
                    )
                    break
                op, spec = step.operation()
                tail = self._step(op, spec, tail, value_serde, f"{step_path}.{op}", stream, i)
                ended = op in _TERMINAL
            name = stream.name or f"stream-{i}"
            if name in self.tails:
                self.problem(f"{path}.name", f"a stream named {name!r} is already defined")
            self.tails[name] = (tail, value_serde)
        if self.problems:
            return None, self.problems
        return graph.Topology(
            nodes=tuple(self.nodes),
            default_key_serde=default_key,
            default_value_serde=default_value,
            latency=self.topo.latency,
            application_id=self.topo.application_id,
        ), []

    def _start(
        self,
        stream: models.StreamSpec,
        path: str,
        default_key: serdes.Serde | None,
        default_value: serdes.Serde | None,
    ) -> tuple[str | None, serdes.Serde | None]:
        src = stream.from_
        given = [x for x in (src.topic, src.topics, src.stream) if x]
        if len(given) != 1:
            self.problem(f"{path}.from", "give exactly one of topic, topics or stream")
            return None, None
        if src.stream:
            if src.stream not in self.tails:
                self.problem(
                    f"{path}.from.stream",
                    f"unknown stream {src.stream!r} (streams are referred to "
                    f"after they are defined; known: {', '.join(self.tails) or 'none'})",
                )
                return None, None
            return self.tails[src.stream]
        key, value = _serde(src.key_serde), _serde(src.value_serde)
        for which, serde, default in (("keySerde", key, default_key), ("valueSerde", value, default_value)):
            if serde is None and default is None:
                self.problem(f"{path}.from.{which}", f"no {which}: set it here or in spec.topology.defaults")
        params: dict[str, Any] = {"topics": [src.topic] if src.topic else list(src.topics or [])}
        if key:
            params["keySerde"] = key
        if value:
            params["valueSerde"] = value
        if src.timestamp:
            params["timestamp"] = src.timestamp
            if message := check.check_expression(src.timestamp):
                self.problem(f"{path}.from.timestamp", message)
        return self.add("source", (), params, f"{path}.from"), value or default_value

    def _check_logic(
        self, params: Mapping[str, Any], path: str, serde: serdes.Serde | None, *, boolean: bool = False
    ) -> None:
        expr, function = params.get("expr"), params.get("function")
        if (expr is None) == (function is None):
            self.problem(path, "give exactly one of expr or function")
            return
        if function is not None:
            if message := check.check_function_ref(function):
                self.problem(f"{path}.function", message)
            return
        assert isinstance(expr, str)
        where = path
        if message := check.check_expression(expr):
            self.problem(where, message)
            return
        if boolean and check.is_boolean_expression(expr) is False:
            self.problem(where, f"type mismatch: a predicate must be boolean, {expr!r} is not")
        fields = check.value_fields(expr)
        if fields and serde is not None and not (serde.name == "json" and serde.schema):
            self.problem(
                where,
                f"type mismatch: {expr!r} reads value.{fields[0]}, but the value is "
                f"{serde.name} (declare valueSerde json with a schema to read fields)",
            )

    def _step(
        self,
        op: str,
        spec: Any,
        tail: str,
        serde: serdes.Serde | None,
        path: str,
        stream: models.StreamSpec,
        index: int,
    ) -> str:
        if op in _LOGIC_OPS:
            params = _logic(spec, returns="boolean" if op in ("filter", "filterNot") else None)
            self._check_logic(params, path, serde, boolean=op in ("filter", "filterNot"))
            return self.add(op, (tail,), params, path)
        if op == "map":
            params = {"key": _logic(spec.key), "value": _logic(spec.value)}
            self._check_logic(params["key"], f"{path}.key", serde)
            self._check_logic(params["value"], f"{path}.value", serde)
            return self.add(op, (tail,), params, path)
        if op == "merge":
            parents = [tail]
            for k, other in enumerate(spec):
                if other not in self.tails:
                    self.problem(f"{path}[{k}]", f"unknown stream {other!r}")
                else:
                    parents.append(self.tails[other][0])
            return self.add(op, tuple(parents), {}, path)
        if op == "repartition":
            return self.add(op, (tail,), {"partitions": spec.partitions} if spec.partitions else {}, path)
        if op == "print":
            return self.add(op, (tail,), {"label": spec.label} if spec.label else {}, path)
        if op == "to":
            to = models.ToSpec(topic=spec) if isinstance(spec, str) else spec
            sink: dict[str, Any] = {"topic": to.topic}
            if to.key_serde:
                sink["keySerde"] = _serde(to.key_serde)
            if to.value_serde:
                sink["valueSerde"] = _serde(to.value_serde)
            return self.add(op, (tail,), sink, path)
        if op in ("groupBy", "groupByKey"):
            params = {} if op == "groupByKey" else _logic(spec)
            if params:
                self._check_logic(params, path, serde)
            return self.add("groupBy", (tail,), params, path)
        if op in ("count", "aggregate", "toStream"):
            parent = self.nodes[-1] if self.nodes and self.nodes[-1].name == tail else None
            wants = "groupBy" if op != "toStream" else ("count", "aggregate")
            if parent is None or parent.op not in wants:
                before = "groupBy or groupByKey" if op != "toStream" else "count or aggregate"
                self.problem(path, f"{op} must directly follow {before}")
            if op == "aggregate":
                if message := check.check_expression(spec.expr):
                    self.problem(f"{path}.expr", message)
                return self.add(op, (tail,), {"fn": spec.fn, "expr": spec.expr}, path)
            return self.add(op, (tail,), {}, path)
        if op == "split":
            branches = []
            for k, branch in enumerate(spec.branches):
                predicate = _logic(branch.predicate, returns="boolean")
                self._check_logic(predicate, f"{path}.branches[{k}].predicate", serde, boolean=True)
                branches.append({"name": branch.name, "predicate": predicate})
            split = self.add(op, (tail,), {"branches": branches, "default": spec.default}, path)
            base = stream.name or f"stream-{index}"
            for name in [b["name"] for b in branches] + ([spec.default] if spec.default else []):
                self.tails[f"{base}.{name}"] = (self.add("branch", (split,), {"branch": name}, path), serde)
            return split
        raise AssertionError(op)


# -- graph → manifest -------------------------------------------------------------------------------


def _serde_out(serde: serdes.Serde) -> Any:
    return {"name": serde.name, "schema": serde.schema} if serde.schema else serde.name


def _logic_out(params: Mapping[str, Any]) -> Any:
    return params["expr"] if set(params) == {"expr"} else dict(params)


def _step_out(node: graph.Node, entry_of: Mapping[str, str]) -> dict[str, Any]:
    p = node.params
    if node.op in _LOGIC_OPS:
        return {node.op: _logic_out(p)}
    if node.op == "map":
        return {"map": {"key": _logic_out(p["key"]), "value": _logic_out(p["value"])}}
    if node.op == "merge":
        return {"merge": [entry_of[parent] for parent in node.parents[1:]]}
    if node.op == "to":
        to: dict[str, Any] = {"topic": p["topic"]}
        for k in ("keySerde", "valueSerde"):
            if k in p:
                to[k] = _serde_out(p[k])
        return {"to": to}
    if node.op == "groupBy":
        return {"groupBy": _logic_out(p)} if p else {"groupByKey": {}}
    if node.op in ("count", "toStream"):
        return {node.op: {}}
    if node.op == "aggregate":
        return {"aggregate": {"fn": p["fn"], "expr": p["expr"]}}
    if node.op == "split":
        out: dict[str, Any] = {
            "branches": [{"name": b["name"], "predicate": _logic_out(b["predicate"])} for b in p["branches"]]
        }
        if p.get("default"):
            out["default"] = p["default"]
        return {"split": out}
    return {node.op: dict(p)}  # repartition, print


def to_manifest_yaml(topology: graph.Topology, *, name: str, spec: Mapping[str, Any] | None = None) -> str:
    """The topology as a StreamApp manifest."""
    streams: list[dict[str, Any]] = []
    entry_of: dict[str, str] = {}  # node → name of the stream whose tail it is (or will be)
    open_tail: str | None = None  # the tail of the last stream, if steps may still be appended
    children = {n.name: len(topology.children(n.name)) for n in topology.nodes}
    for node in topology.nodes:
        if node.op == "branch":
            split_entry = entry_of[node.parents[0]]
            entry_of[node.name] = f"{split_entry}.{node.params['branch']}"
            open_tail = None
            continue
        if node.op == "source":
            src: dict[str, Any] = {}
            topics = node.params["topics"]
            if len(topics) == 1:
                src["topic"] = topics[0]
            else:
                src["topics"] = list(topics)
            for k in ("keySerde", "valueSerde"):
                if k in node.params:
                    src[k] = _serde_out(node.params[k])
            if "timestamp" in node.params:
                src["timestamp"] = node.params["timestamp"]
            streams.append({"name": f"stream-{len(streams)}", "from": src, "steps": []})
        else:
            parent = node.parents[0]
            if parent != open_tail:
                streams.append(
                    {"name": f"stream-{len(streams)}", "from": {"stream": entry_of[parent]}, "steps": []}
                )
            streams[-1]["steps"].append(_step_out(node, entry_of))
        entry_of[node.name] = streams[-1]["name"]
        open_tail = node.name if children[node.name] == 1 and node.op not in _TERMINAL else None
    topo: dict[str, Any] = {}
    if topology.application_id:
        topo["applicationId"] = topology.application_id
    if topology.latency != "default":
        topo["latency"] = topology.latency
    defaults = {
        k: _serde_out(v)
        for k, v in (("keySerde", topology.default_key_serde), ("valueSerde", topology.default_value_serde))
        if v
    }
    if defaults:
        topo["defaults"] = defaults
    topo["streams"] = [{k: v for k, v in s.items() if k != "steps" or v} for s in streams]
    doc = {
        "apiVersion": "streamapp.io/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": name},
        "spec": {**(spec or {}), "topology": topo},
    }
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
