"""A trace pickled by columns (how a sweep's worker sends it back) loads as the same records."""

import pickle

import transformers

from vramsim.search.sweep_workers import TraceTask, trace_records
from vramsim.tracer.records import Trace


def test_a_trace_comes_back_equal(tiny_llama: transformers.LlamaConfig) -> None:
    """Every record of a checkpointable train step (storages, ops, holds, units, events), and an empty trace."""
    traced = trace_records(TraceTask(tiny_llama, {"task": "train", "batch_size": 2, "seq_len": 32, "device": "h100"}))
    assert isinstance(traced, Trace) and traced.storages and traced.ops and traced.holds and traced.units
    back = pickle.loads(pickle.dumps(traced))
    assert back == traced and type(back.events[0]) is tuple and type(back.storages[0].shape) is tuple
    assert pickle.loads(pickle.dumps(Trace())) == Trace()
