"""torchtune's activation offloading on top of checkpointing, against its closed form.

torchtune's ``OffloadActivations`` refuses to run without an accelerator, and on the CPU the host is the device,
so no CPU run can show what it moves: these tests check the what-if against what its hooks do by construction
(``estimators/activation_offloading.py``): a decoder layer's input, which a non-reentrant checkpoint saves through
the hooks, leaves the device when the fifth later offloaded tensor is packed, comes back once when backward
replays its layer, and the head's and the loss's saved tensors and the layer's keyword inputs stay as they were.
"""

from __future__ import annotations

from functools import cache

import networkx as nx
import pytest
from cli_runs import run
from tiny_models import tiny_llama_config

import vramsim
from vramsim.analysis.traced import trace_workload
from vramsim.cache.keys import request_key
from vramsim.config import SimulationConfig
from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.activation_offloading import FORWARD_STASH, MIN_OFFLOAD_BYTES, SavedThroughHooks, offload_activations
from vramsim.estimators.checkpointing import what_if
from vramsim.estimators.checkpointing_plan import parse_checkpointing
from vramsim.workload.targets import resolve_target

LAYERS, BATCH, SEQ, HIDDEN = 8, 2, 64, 64
_OPTIONS = {"task": "train", "batch_size": BATCH, "seq_len": SEQ, "device": "h100", "dtype": "bf16"}


@cache
def _graph() -> nx.MultiDiGraph:
    model = tiny_llama_config()
    model.num_hidden_layers = LAYERS
    config = SimulationConfig(**_OPTIONS)
    return trace_workload(model, config, resolve_target("h100"), derive=False).graph


def _last_step_units(graph: nx.MultiDiGraph) -> list:
    last = max(unit.step for unit in graph.graph["units"])
    return sorted((u for u in graph.graph["units"] if u.step == last), key=lambda u: u.index)


def test_each_layer_input_leaves_the_device_five_packs_later_and_comes_back_once() -> None:
    graph = _graph()
    plain = what_if(graph, parse_checkpointing("full")).timeline
    outcome = what_if(graph, parse_checkpointing("full"), activation_offloading=True)
    blocks = outcome.timeline.blocks
    units = _last_step_units(graph)
    assert [len(unit.saved_inputs) for unit in units] == [1] * LAYERS  # transformers passes hidden_states alone
    hidden = [unit.saved_inputs[0] for unit in units]
    assert {blocks[sid].nbytes for sid in hidden} == {BATCH * SEQ * HIDDEN * 2}
    backward_starts = min(block.alloc_at for block in blocks if block.copy_of in hidden)
    for index, sid in enumerate(hidden):
        # one pack per layer: layer i + 5's input pack drops layer i's stashed device copy, unless the program
        # itself holds it longer (transformers keeps the embedding's output, inputs_embeds, to the forward's end)
        if index + FORWARD_STASH < LAYERS:
            own = graph.nodes[("storage", sid)]["unreferenced"] or graph.nodes[("storage", sid)]["free_at"][0]
            expected = max(units[index + FORWARD_STASH].first_clock, own)
            assert blocks[sid].free_at is not None and blocks[sid].free_at[0] == expected
        else:  # still stashed when backward's first node ran
            assert blocks[sid].free_at is not None and blocks[sid].free_at <= backward_starts
        assert plain.blocks[sid].free_at is not None and plain.blocks[sid].free_at > backward_starts
    fetched = [block for block in blocks if block.copy_of in hidden]
    assert sorted(block.copy_of for block in fetched) == sorted(hidden)
    assert all(block.phase == "backward" and block.alloc_at >= backward_starts for block in fetched)
    keyword_inputs = {sid for unit in units for sid in unit.inputs} - set(hidden)
    assert keyword_inputs and all(blocks[sid].free_at[0] == plain.blocks[sid].free_at[0] for sid in keyword_inputs)
    assert outcome.cost.offloaded_bytes >= LAYERS * BATCH * SEQ * HIDDEN * 2


def test_the_head_and_the_loss_keep_their_saved_tensors() -> None:
    """torchtune runs the output head under a ``NoOpManager`` and the loss outside the context."""
    graph = _graph()
    plain = what_if(graph, parse_checkpointing("full")).timeline.blocks
    blocks = what_if(graph, parse_checkpointing("full"), activation_offloading=True).timeline.blocks
    head = [sid for sid, op, _ in _saves(graph) if graph.nodes[("op", op)]["module"] in ("lm_head", "")]
    assert head and all(blocks[sid].free_at == plain[sid].free_at for sid in head)
    assert not any(block.copy_of in head for block in blocks if block.phase == "backward")


def _saves(graph: nx.MultiDiGraph) -> list[tuple[int, int, dict]]:
    from vramsim.tracer.graph import saved_edges

    last = max(unit.step for unit in graph.graph["units"])
    return [
        (sid, op, a)
        for sid, op, a in saved_edges(graph)
        if graph.nodes[("op", op)]["phase"] == "forward" and graph.nodes[("op", op)]["step"] == last
        and graph.nodes[("storage", sid)]["alloc_at"][0] != 0
    ]  # fmt: skip


def _save(sid: int, pack: int, *, nbytes: int = 4096, node: int | None = None, offloadable: bool = True) -> SavedThroughHooks:
    unpack = 100 - pack
    return SavedThroughHooks(
        sid=sid, nbytes=nbytes, pack=pack, unpack=unpack, release=(unpack, 1, 0), node=("op", node or sid),
        node_done=(unpack, 1, 0), offloadable=offloadable,
    )  # fmt: skip


def test_small_tensors_parameters_and_repeats_follow_torchtunes_rules() -> None:
    """Ids count every pack; a tensor under 1 KiB or not offloadable stays; a storage saved twice moves once; a
    fetched copy is held until the next node that unpacks an offloaded tensor has run."""
    saves = [
        _save(0, 1),
        _save(1, 2, nbytes=MIN_OFFLOAD_BYTES - 1),
        _save(2, 3, offloadable=False),
        _save(0, 4),
        _save(3, 5),
        _save(4, 6),
        _save(5, 7),
    ]
    outcome = offload_activations(saves, at=lambda clock: None if clock is None else (clock, 1, 0), backward_end=(99, 1, 0))
    # id 5 (sid 4) is five ids past id 0 (sid 0): its pack drops sid 0's device copy; the rest wait for backward
    assert outcome.held == {0: (6, 1, 0), 3: (93, 1, 0), 4: (93, 1, 0), 5: (93, 1, 0)}
    assert outcome.moved_bytes == 4 * 4096
    fetched = {sid: (start, free) for sid, start, free in outcome.fetched}
    assert set(fetched) == {0, 3, 4, 5}
    # backward unpacks sid 5 (clock 93), 4 (94), 3 (95), then 0 (96, its later save): each held until the next has run
    assert fetched[5] == ((93, 1, 0), (94, 1, 0))
    assert fetched[3] == ((95, 1, 0), (99, 1, 0)) or fetched[3][1] >= (96, 1, 0)
    assert fetched[0][1] == (99, 1, 0)


def test_offloading_lowers_the_reported_peak_and_is_named_in_the_header_and_the_key(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = tiny_llama_config()
    model.num_hidden_layers = LAYERS
    plain = vramsim.simulate(model, checkpointing="none", **_OPTIONS)
    offloaded = vramsim.simulate(model, checkpointing="none", activation_offloading=True, **_OPTIONS)
    assert offloaded.breakdown["activations"] < plain.breakdown["activations"]
    key = request_key("simulate", model, {**_OPTIONS, "activation_offloading": True})
    assert key is not None and key != request_key("simulate", model, _OPTIONS)
    path = tmp_path / "config.json"
    model.to_json_file(path)
    code, out, _ = run(capsys, "trace", str(path), "--seq-len", "8", "--device", "h100", "--checkpointing", "full",
                       "--activation-offloading", "--no-cache")  # fmt: skip
    assert code == 0
    assert "activation offloading torchtune's OffloadActivations (streams)" in " ".join(out.split())


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"device": "cpu"}, ConfigError, "the cpu target's own memory"),
        ({"checkpointing": "offload"}, ConfigError, "offload already moves every saved tensor"),
        ({"task": "forward"}, ConfigError, "applies to training"),
    ],
)
def test_activation_offloading_is_refused_where_it_means_nothing(options: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        SimulationConfig(**{**_OPTIONS, "activation_offloading": True, **options})


def test_the_strategy_search_refuses_it_in_one_line() -> None:
    from vramsim.search.strategy import strategy_searcher

    with pytest.raises(UnsupportedError, match="activation_offloading is not modelled yet"):
        strategy_searcher(tiny_llama_config(), **_OPTIONS, activation_offloading=True)
