"""The strategy search: tensor, pipeline, context and expert parallel layouts, checkpointing auto, few traces."""

from __future__ import annotations

from typing import Any

import pytest
import transformers
from cli_runs import searched_programs

import vramsim
from vramsim.config import SimulationConfig
from vramsim.results.strategy import SCHEMES
from vramsim.search import strategy, strategy_space
from vramsim.search.strategy import cheapest_strategy
from vramsim.search.strategy_space import PIPELINE_SCHEMES, settings

_MiB = 1 << 20

# The loss's float32 logits (4 x 512 x 32,000, 262 MB a copy) dwarf the weights (4.2M parameters): data
# parallelism never splits them, tensor parallelism's vocabulary-parallel loss halves them.
_WIDE_VOCAB = transformers.LlamaConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=32000,
    max_position_embeddings=1024,
)
_ASKED = {"seq_len": 512, "batch_size": 4, "device": "h100"}

# Eight layers of long activations: checkpointing decides whether one GPU holds the step.
_DEEP = transformers.LlamaConfig(
    hidden_size=256,
    intermediate_size=512,
    num_hidden_layers=8,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=1000,
    max_position_embeddings=2048,
)

_MIXTRAL = transformers.MixtralConfig(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=500,
    num_local_experts=8,
    num_experts_per_tok=2,
)


def _headroom(model: Any, usable: int, **options: Any) -> float:
    """The headroom that leaves ``usable`` bytes of the target's memory."""
    capacity = vramsim.simulate(model, task="forward", seq_len=8, device=options["device"]).capacity_bytes
    assert capacity is not None
    return 1 - usable / capacity


def test_tensor_parallel_fits_where_data_parallel_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two GPUs: no data-parallel scheme fits (each rank holds every logit), TP 2 does; one trace per tp degree."""
    headroom = _headroom(_WIDE_VOCAB, 1650 * _MiB, **_ASKED)
    searched = searched_programs(monkeypatch)
    found = cheapest_strategy(_WIDE_VOCAB, gpus=2, headroom=headroom, **_ASKED)
    best = found.cheapest
    assert best is not None and (best.gpus, best.tp, best.scheme, best.checkpointing) == (2, 2, "one replica", "selective")
    leanest = vramsim.simulate_each(
        _WIDE_VOCAB,
        [{"gpus": 2, "checkpointing": "full", **scheme} for scheme in ({"zero": 3}, {"fsdp": "full"}, {})],
        headroom=headroom,
        **_ASKED,
    )
    assert all(r.device_bytes > found.usable_bytes for r in leanest)  # ZeRO-3, FSDP2 full, DDP
    vocab_parallel = vramsim.simulate(_WIDE_VOCAB, headroom=headroom, **_ASKED, **best.options())
    assert vocab_parallel.device_bytes == best.device_bytes <= found.usable_bytes
    assert min(r.device_bytes for r in leanest) - best.device_bytes >= 4 * 512 * 32000 * 4 // 2  # half a logits copy
    # one rank, TP 2's, CP 2's (within its bound); never one per setting
    assert [p.tp for p in searched] == [1, 2, 1] and found.traces == 3
    assert len(found.candidates) > found.traces


def test_a_choice_that_fits_where_full_checkpointing_does_not_is_found() -> None:
    """``full`` is not the least a layout can hold: on two layers of wide logits one GPU's ``full`` reads 1,896.8 MiB
    on the device (its recompute fragments the cache) and ``selective`` 1,684.8 MiB. At 1,800 MiB usable the search
    once measured one GPU's other choices only after ``full`` fit, and answered TP 2 on two GPUs."""
    headroom = _headroom(_WIDE_VOCAB, 1800 * _MiB, **_ASKED)
    found = cheapest_strategy(_WIDE_VOCAB, gpus=2, headroom=headroom, **_ASKED)
    best = found.cheapest
    assert best is not None and (best.gpus, best.scheme, best.checkpointing) == (1, "one GPU", "selective")
    full = vramsim.simulate(_WIDE_VOCAB, checkpointing="full", headroom=headroom, **_ASKED)
    selective = vramsim.simulate(_WIDE_VOCAB, headroom=headroom, **_ASKED, **best.options())
    assert selective.device_bytes == best.device_bytes <= found.usable_bytes < full.device_bytes


def test_auto_is_never_worse_than_a_uniform_choice() -> None:
    """One GPU where no checkpointing does not fit: auto fits with no more recompute than any uniform choice that fits."""
    asked = {"seq_len": 1024, "batch_size": 8, "device": "h100"}
    headroom = _headroom(_DEEP, 1700 * _MiB, **asked)
    found = cheapest_strategy(_DEEP, gpus=1, headroom=headroom, **asked)
    auto = next(c for c in found.candidates if c.checkpointing == "auto")
    full = next(c for c in found.candidates if c.checkpointing == "full")
    assert auto.fits and found.cheapest == auto and auto.plan not in ("none", "full")
    every = vramsim.simulate(_DEEP, checkpointing="all", headroom=headroom, **asked).checkpointing
    flops = {c.checkpointing: c.cost.recomputed_flops for c in every}
    fitting = [c.checkpointing for c in every if c.device_bytes <= found.usable_bytes and c.checkpointing != "offload"]
    assert "none" not in fitting and "selective:torchtitan" in fitting
    for choice in fitting:  # shares of the same step's FLOPs: compared through full's
        assert auto.recomputed * flops["full"] <= full.recomputed * flops[choice]


def test_layouts_follow_the_model() -> None:
    """Expert parallelism only for experts, tensor parallelism only for dense decoders it splits, context
    parallelism wherever its 2 x cp chunks divide the sequence (not with ep), pipelines only across nodes."""
    short = SimulationConfig(task="train", seq_len=1024, device="h100")
    odd = SimulationConfig(task="train", seq_len=1000, device="h100")  # 2 x 4 divides 1,000, 2 x 8 does not
    dense = [s for n in (1, 2, 4, 8, 16) for s in settings(n, _WIDE_VOCAB, short)]
    moe = [s for n in (1, 2, 4, 8) for s in settings(n, _MIXTRAL, short)]
    assert all(s.ep == 1 for s in dense) and {s.tp for s in dense} == {1, 2, 4, 8}
    assert {s.cp for s in dense} == {1, 2, 4, 8, 16} and {s.cp for s in settings(16, _WIDE_VOCAB, odd)} == {1, 2, 4}
    assert {s.ep for s in moe} == {1, 2, 4} and all(s.tp == 1 for s in moe)  # 8 experts, top 2: at most 4 ranks
    assert {s.cp for s in moe if s.ep == 1} == {1, 2, 4, 8} and all(s.cp == 1 for s in moe if s.ep > 1)
    assert all(s.dp % s.ep == 0 for s in moe) and any(s.ep == 2 and s.dp == 8 for s in moe)  # EP among the DP ranks
    assert {s.scheme for s in moe if s.ep > 1} == set(SCHEMES)  # the ep ranks run their own tokens: always data parallel
    assert {s.pp for s in dense if s.gpus <= 8} == {1} and {s.pp for s in dense if s.gpus == 16} == {1, 2}
    small_nodes = list(settings(8, _WIDE_VOCAB, short, gpus_per_node=2))  # a price sheet's offer of 2-GPU nodes
    assert {s.tp for s in small_nodes} == {1, 2} and {s.pp for s in small_nodes} == {1, 2}  # pp: at most its 2 layers
    assert all(s.scheme in PIPELINE_SCHEMES for s in dense if s.pp > 1 and s.dp > 1)
    assert {s.checkpointing for s in dense} == {"none", "selective", "every:2", "full", "auto"}


def test_pipeline_candidates_cost_their_bubble(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nodes of one GPU: a pipeline on 2; nothing fits (the lower bound says so untraced), and where every group's
    full checkpointing is measured, each pipeline's bubble is (p - 1) / m, or (p - 1) / (v m) interleaved, and its
    figure is simulate's."""
    monkeypatch.setattr(strategy_space, "GPUS_PER_NODE", 1)
    tiny = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=500,
        max_position_embeddings=256,
    )
    asked = {"seq_len": 64, "device": "h100", "micro_batches": 4}
    headroom = _headroom(tiny, 64 * _MiB, **asked)
    found = cheapest_strategy(tiny, gpus=2, headroom=headroom, **asked)  # the CUDA context alone passes 64 MiB
    every = sum(1 for n in (1, 2) for _ in settings(n, tiny, SimulationConfig(task="train", seq_len=64, device="h100")))
    assert found.cheapest is None and found.candidates == [] and len(found.ruled_out) == every == 75 and found.traces == 1
    monkeypatch.setattr(strategy.FloorBound, "bytes", lambda self, setting: 0)  # none ruled out: each group measured
    monkeypatch.setattr(strategy.TracedBound, "bytes", lambda *_: None)
    found = cheapest_strategy(tiny, gpus=2, headroom=headroom, **asked)
    assert found.cheapest is None and found.traces == 2  # the one-rank program and the CP 2 rank's
    piped = {c.pp_schedule: c for c in found.candidates if c.pp == 2 and c.checkpointing == "full"}
    assert set(piped) == {"1f1b", "interleaved-1f1b"}
    assert (piped["1f1b"].bubble, piped["interleaved-1f1b"].bubble) == (1 / 4, 1 / 8)
    bubbles = {"1f1b": 1 / 4, "interleaved-1f1b": 1 / 8}  # every choice measured: none is taken to hold the least
    assert all(c.bubble == bubbles[c.pp_schedule] for c in found.candidates if c.pp == 2)
    report = vramsim.simulate(tiny, **asked, **piped["1f1b"].options())
    assert report.device_bytes == piped["1f1b"].device_bytes


def test_the_table_fits_80_columns_and_folds_what_was_not_tried() -> None:
    """The CLI's table at 80 columns: the cheapest setting as flags, each setting's figures whole (no cut, no line over
    80, no trailing space), the layouts not tried counted by reason; ``verbose`` lists each."""
    from rich.console import Console

    from vramsim.results.strategy import Candidate, Refusal, RuledOut, StrategySearch
    from vramsim.views.fit import render_strategies

    piped = Candidate(
        gpus=128,
        tp=8,
        pp=16,
        pp_schedule="interleaved-1f1b",
        cp=4,
        ep=1,
        scheme="FSDP2 grad-op",
        checkpointing="auto",
        plan="first:100+selective:torchtitan:26",
        device_bytes=(1 << 30) - (1 << 20),
        peak_bytes=66 << 30,
        fits=True,
        recomputed=0.01,
        recomputed_ops=0.02,
        bubble=0.125,
        communication=1.03 * (1 << 40),
    )
    refused = [
        Refusal(gpus=g, tp=8, pp=16, cp=1, ep=1, scheme=scheme, reason="pp=16: 126 layers over 16 stages x 2 virtual")
        for g in (16, 32, 64)
        for scheme in ("DDP", "ZeRO-1")
    ]
    search = StrategySearch(
        model="meta-llama/Llama-3.1-405B",
        target="h100-sxm",
        usable_bytes=71 << 30,
        max_gpus=128,
        candidates=[piped],
        cheapest=piped,
        traces=2,
        skipped=5,
        ruled_out=[
            RuledOut(gpus=64, tp=8, pp=1, pp_schedule=None, cp=2, ep=1, scheme="FSDP2 full", checkpointing=c, bound_bytes=b)
            for c, b in (("none", 90 << 30), ("full", 3 * (1 << 30) + (71 << 30)))
        ],
        refused=[*refused, Refusal(gpus=None, tp=8, pp=1, cp=1, ep=1, scheme=None, reason="tp=8: too many")],
        trace_seconds=1.0,
    )

    def rendered(verbose: bool) -> list[str]:
        console = Console(width=80, record=True)
        render_strategies(search, console, verbose=verbose)
        lines = console.export_text().splitlines()
        assert all(len(line) <= 80 and line == line.rstrip() for line in lines)
        return lines

    lines = rendered(False)
    text = "\n".join(lines)
    assert lines[2:4] == [
        "    --gpus 128 --tp 8 --pp 16 --pp-schedule interleaved-1f1b --cp 4 --fsdp",
        "    grad-op --checkpointing auto",
    ]
    row = next(line for line in lines if line.startswith(" 128 "))
    assert "1.00 GiB" in row and "13.5%" in row and "1.03 TiB" in row and row.endswith("yes")
    header = next(line for line in lines if line.startswith("GPUs "))
    start, end = header.index("checkpointing"), header.index("device") - len("1.00 GiB") + len("device")
    cells = lines[lines.index(row) : lines.index(row) + 4]
    assert "".join(cell[start:end].strip() for cell in cells) == "auto:first:100+selective:torchtitan:26"  # wrapped, whole
    assert "  not tried (6 layouts): pp=16: 126 layers over 16 stages x 2 virtual" in lines
    assert "  not tried (1 layout): tp=8: too many" in lines and "2 ruled out before measuring" in text
    assert "--verbose lists them" in text and "ruled out:" not in text
    assert sum("not tried" in line for line in lines) == 3 and lines[-4] == "  (--verbose lists each layout not tried)"
    listed = rendered(True)
    joined = " ".join(line.strip() for line in listed)  # a line over 80 columns wraps
    assert "not tried: TP 8 x PP 16, DDP on 32 GPUs: pp=16: 126 layers over 16 stages x 2 virtual" in joined
    assert "  not tried: TP 8 (every setting): tp=8: too many" in listed and sum("not tried" in x for x in listed) == 7
    assert "ruled out: TP 8 x CP 2, FSDP2 full, checkpointing none on 64 GPUs: at least 90.00 GiB > 71.00 GiB usable" in joined
    assert "checkpointing full on 64 GPUs: at least 74.00 GiB > 71.00 GiB usable" in joined


# Sixteen thin layers at 64 x 2,048 tokens: full checkpointing keeps each layer's hidden-sized input (1 GiB in all),
# which tensor parallelism leaves whole and context parallelism halves.
_THIN = transformers.LlamaConfig(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=16,
    num_attention_heads=4,
    num_key_value_heads=4,
    vocab_size=256,
    max_position_embeddings=4096,
)


def test_context_parallel_is_tried_below_long_sequences(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 405B case in small (issue: 128 H100s at 8,192 tokens were told nothing fits while TP 8 x CP 4 fits): at
    2,048 tokens only CP 2 holds the step (2,432.81 MiB with full checkpointing) in 2,600 MiB: not one GPU
    (2,882.81 MiB), not DDP, FSDP2 full or TP 2 on two (3,208.81, 3,156.81, 3,104.81 MiB). The search finds it, the
    setting found fits when traced, and the lower bound that rules settings out untraced is below every figure
    measured."""
    asked = {"seq_len": 2048, "batch_size": 64, "device": "h100", "mixed_precision": "bf16"}
    headroom = _headroom(_THIN, 2600 * _MiB, **asked)
    bounds: list[Any] = []
    real = strategy.FloorBound.of
    monkeypatch.setattr(strategy.FloorBound, "of", lambda *a, **k: bounds.append(real(*a, **k)) or bounds[-1])
    told: list[str] = []
    found = cheapest_strategy(_THIN, gpus=2, headroom=headroom, progress=told.append, **asked)
    best = found.cheapest
    assert best is not None and best.gpus == 2 and best.cp == 2 and best.tp == 1
    assert [m.split(":")[0] for m in told if m.startswith("weighing")] == ["weighing 1 GPU(s)", "weighing 2 GPU(s)"]
    assert any(m.startswith("measuring CP 2 x ") for m in told) and any(
        m.startswith("tracing LlamaConfig for CP 2 (trace ") for m in told
    )
    traced = vramsim.simulate(_THIN, headroom=headroom, **asked, **best.options())
    assert traced.device_bytes == best.device_bytes <= found.usable_bytes
    others = vramsim.simulate_each(
        _THIN,
        [{"gpus": g, "checkpointing": "full", **s} for g, s in ((1, {}), (2, {}), (2, {"fsdp": "full"}))],
        headroom=headroom,
        **asked,
    )
    tensor = vramsim.simulate(_THIN, gpus=2, tp=2, checkpointing="full", headroom=headroom, **asked)
    assert all(r.device_bytes > found.usable_bytes for r in (*others, tensor))  # one GPU, DDP, FSDP2 full, TP 2: none fits
    (bound,) = bounds
    for c in found.candidates:
        setting = strategy_space.Setting(
            **{k: getattr(c, k) for k in ("gpus", "tp", "pp", "cp", "ep", "pp_schedule", "scheme", "checkpointing")}
        )
        assert bound.bytes(setting) <= c.device_bytes


def test_frozen_weights_have_no_gradients_to_synchronise() -> None:
    """LoRA under data parallelism: DDP's all-reduce moves the adapters' gradients only (its reducer buckets what
    requires grad), while FSDP2 full still gathers every weight twice and reduce-scatters the adapters'."""
    from vramsim.estimators.communication import communication_bytes

    model = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=128
    )
    shape = strategy.strategy_searcher(model, device="h100-sxm", task="train", seq_len=16, lora=4).shape
    # every linear of 2 layers (peft's all-linear, vramsim's default), A (4 x in) and B (out x 4) in float32:
    # q, k, v, o 64 -> 64, gate and up 64 -> 128, down 128 -> 64
    adapters = 2 * 4 * (4 * (64 + 64) + 3 * (64 + 128)) * 4
    assert shape.trained_bytes == adapters and shape.weight_bytes > 10 * adapters

    def sent(scheme: str) -> float:
        layout = {"dp": 4, "tp": 1, "pp": 1, "virtual": 1, "micro_batches": 1, "cp": 1, "ep": 1, "recomputed_layers": 0}
        return communication_bytes(shape, scheme=scheme, **layout)

    assert sent("DDP") == 2 * adapters * 3 / 4
    assert sent("FSDP2 full") == (2 * shape.weight_bytes + adapters) * 3 / 4
