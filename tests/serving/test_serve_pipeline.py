"""Pipeline-parallel serving budgets: vLLM's layer split, each stage's own memory, the fewest blocks for all."""

from __future__ import annotations

import pytest
import transformers

from vramsim.errors import ConfigError, UnsupportedError
from vramsim.estimators.serving import pp_partition
from vramsim.serving.budget import serve

OPTIONS = dict(device="l4", max_model_len=256, max_num_batched_tokens=256, max_num_seqs=4, enforce_eager=True)


def _llama(*, tied: bool) -> transformers.LlamaConfig:
    return transformers.LlamaConfig(
        vocab_size=4096,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=5,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=tied,
        torch_dtype="bfloat16",
    )


@pytest.mark.parametrize(("layers", "pp", "split"), [
    (32, 2, [(0, 16), (16, 32)]),
    (32, 3, [(0, 11), (11, 22), (22, 32)]),  # the remainder to the stages before the last, from the second-to-last
    (5, 4, [(0, 1), (1, 2), (2, 4), (4, 5)]),
])  # fmt: skip
def test_layers_split_as_vllm_get_pp_indices(layers: int, pp: int, split: list[tuple[int, int]]) -> None:
    assert pp_partition(layers, pp) == split


def test_each_stage_holds_its_layers_and_the_fewest_blocks_bind() -> None:
    """Untied: the first stage holds the embedding, the last the head; the KV per token is the stage's layers'."""
    whole = serve(_llama(tied=False), **OPTIONS)
    staged = serve(_llama(tied=False), pp=2, **OPTIONS)
    first, last = staged.stages
    assert (first.layers, last.layers) == ((0, 3), (3, 5))
    assert staged.kv_blocks == min(first.kv_blocks, last.kv_blocks) and staged.pp == 2 and staged.gpus == 2
    assert staged.kv_bytes_per_token == whole.kv_bytes_per_token * 3 // 5  # the binding stage: 3 of 5 layers
    embedding = 4096 * 256 * 2
    # the stages' weights are the whole model's, the final norm and rotary buffers counted on each (a few KiB)
    assert 0 <= first.weights_bytes + last.weights_bytes - whole.weights_bytes <= 4096
    assert first.weights_bytes > embedding and last.weights_bytes > embedding


def test_tied_embeddings_sit_on_the_first_and_the_last_stage() -> None:
    """vLLM builds the tied embedding on the first stage and, as the head, on the last; a middle stage has neither."""
    stages = serve(_llama(tied=True), pp=3, **OPTIONS).stages
    assert [stage.layers for stage in stages] == [(0, 2), (2, 4), (4, 5)]
    embedding = 4096 * 256 * 2
    assert stages[0].weights_bytes - stages[1].weights_bytes == embedding  # the same two layers, and the embedding
    assert stages[2].weights_bytes > embedding  # one layer and the tied head


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"pp": 8}, ConfigError, "pipeline parallel 8 needs at least 8 decoder layers"),
    ({"pp": 2, "engine": "sglang"}, UnsupportedError, "modelled for vLLM only"),
    ({"pp": 2, "gpus": 3}, ConfigError, "not a multiple of pp=2"),
])  # fmt: skip
def test_bad_pipeline_options_are_one_line(options: dict[str, object], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        serve(_llama(tied=False), **{**OPTIONS, **options})
