"""Real transformers models at full depth and tiny width, built from configs with random
weights (nothing downloaded), shared by the LLM bench (bench_llm.py), the store bench and the
real-model tests (tests/torch/).

A model's guard set depends on its depth and structure, not its width: ``build("qwen3")``
has Qwen3-8B's 36 layers, hence its guards, at hidden size 64. Each builder returns the
model in eval mode and the keyword arguments of one forward (batch 1, 8 tokens, or one
32x32 image for ViT).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# The real depth of the model each name stands for.
DEPTHS = {"qwen3": 36, "llama": 32, "gpt2": 12, "bert": 12, "vit": 12,
          # Mistral-7B, Gemma2-2B, StarCoder2-3B, OPT-350m, Phi-2
          "mistral": 32, "gemma2": 26, "starcoder2": 30, "opt": 24, "phi": 32,
          # Qwen2-7B, BLOOM-1b7, Pythia-1.4B, Falcon-7B, GPT-J-6B, Granite-3-8B, OLMo-2-7B,
          # Phi-3-mini, StableLM-3B, Mixtral-8x7B, Qwen3-30B-A3B, Gemma3-1B
          "qwen2": 28, "bloom": 24, "gpt_neox": 24, "falcon": 32, "gptj": 28, "granite": 40,
          "olmo2": 32, "phi3": 32, "stablelm": 32, "mixtral": 32, "qwen3_moe": 48,
          "gemma3": 26}
TOKENS = 8
VOCAB = 512


def _tokens(seq: int = TOKENS) -> dict[str, Any]:
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(0, VOCAB, (1, seq), generator=g)}


def _qwen3(layers: int) -> tuple[torch.nn.Module, dict[str, Any]]:
    import transformers

    cfg = transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, use_cache=False,
    )
    return transformers.Qwen3ForCausalLM(cfg), {**_tokens(), "use_cache": False}


def _llama(layers: int) -> tuple[torch.nn.Module, dict[str, Any]]:
    import transformers

    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, use_cache=False,
    )
    return transformers.LlamaForCausalLM(cfg), {**_tokens(), "use_cache": False}


def _gpt2(layers: int) -> tuple[torch.nn.Module, dict[str, Any]]:
    import transformers

    cfg = transformers.GPT2Config(
        vocab_size=VOCAB, n_embd=64, n_layer=layers, n_head=4, n_positions=64, use_cache=False,
        bos_token_id=0, eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(cfg), {**_tokens(), "use_cache": False}


def _bert(layers: int) -> tuple[torch.nn.Module, dict[str, Any]]:
    import transformers

    cfg = transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, max_position_embeddings=64,
    )
    return transformers.BertModel(cfg), _tokens()


def _vit(layers: int) -> tuple[torch.nn.Module, dict[str, Any]]:
    import transformers

    cfg = transformers.ViTConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        image_size=32, patch_size=8,
    )
    g = torch.Generator().manual_seed(0)
    return transformers.ViTModel(cfg), {"pixel_values": torch.randn(1, 3, 32, 32, generator=g)}


def _decoder(config: str, model: str, **extra: Any
             ) -> Callable[[int], tuple[torch.nn.Module, dict[str, Any]]]:
    """A builder of a decoder-only causal LM given its config and model class names."""

    def make(layers: int) -> tuple[torch.nn.Module, dict[str, Any]]:
        import transformers

        cfg = getattr(transformers, config)(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=layers, num_attention_heads=4,
            use_cache=False, **extra)
        return getattr(transformers, model)(cfg), {**_tokens(), "use_cache": False}

    return make


BUILDERS: dict[str, Callable[[int], tuple[torch.nn.Module, dict[str, Any]]]] = {
    "qwen3": _qwen3, "llama": _llama, "gpt2": _gpt2, "bert": _bert, "vit": _vit,
    # other architectures (``bench_llm.py --models``): each layer's activation a partial
    # (Gemma2, StarCoder2), biases on every projection (OPT, Phi, StarCoder2)
    "mistral": _decoder("MistralConfig", "MistralForCausalLM", intermediate_size=128,
                        num_key_value_heads=2, head_dim=16),
    "gemma2": _decoder("Gemma2Config", "Gemma2ForCausalLM", intermediate_size=128,
                       num_key_value_heads=2, head_dim=16),
    "starcoder2": _decoder("Starcoder2Config", "Starcoder2ForCausalLM",
                           intermediate_size=128, num_key_value_heads=2, bos_token_id=0,
                           eos_token_id=0),
    "opt": _decoder("OPTConfig", "OPTForCausalLM", ffn_dim=128, word_embed_proj_dim=64,
                    max_position_embeddings=64, pad_token_id=1),
    "phi": _decoder("PhiConfig", "PhiForCausalLM", intermediate_size=128),
    # the survey of more architectures (README, docs/real-models.md)
    "qwen2": _decoder("Qwen2Config", "Qwen2ForCausalLM", intermediate_size=128,
                      num_key_value_heads=2),
    "bloom": _decoder("BloomConfig", "BloomForCausalLM"),
    "gpt_neox": _decoder("GPTNeoXConfig", "GPTNeoXForCausalLM", intermediate_size=128),
    "falcon": _decoder("FalconConfig", "FalconForCausalLM"),
    "gptj": _decoder("GPTJConfig", "GPTJForCausalLM", rotary_dim=8),
    "granite": _decoder("GraniteConfig", "GraniteForCausalLM", intermediate_size=128,
                        num_key_value_heads=2),
    "olmo2": _decoder("Olmo2Config", "Olmo2ForCausalLM", intermediate_size=128),
    "phi3": _decoder("Phi3Config", "Phi3ForCausalLM", intermediate_size=128, pad_token_id=0),
    "stablelm": _decoder("StableLmConfig", "StableLmForCausalLM", intermediate_size=128,
                         num_key_value_heads=4),
    "mixtral": _decoder("MixtralConfig", "MixtralForCausalLM", intermediate_size=64,
                        num_key_value_heads=2, num_local_experts=4),
    "qwen3_moe": _decoder("Qwen3MoeConfig", "Qwen3MoeForCausalLM", intermediate_size=64,
                          moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                          num_key_value_heads=2, head_dim=16),
    "gemma3": _decoder("Gemma3TextConfig", "Gemma3ForCausalLM", intermediate_size=128,
                       num_key_value_heads=2, head_dim=16),
}


def build(name: str, layers: int | None = None, device: str = "cpu"
          ) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The model ``name`` (a key of BUILDERS) with ``layers`` layers (default: its real depth),
    seeded, in eval mode on ``device``, and the keyword arguments of one forward there."""
    if name not in BUILDERS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(BUILDERS)}")
    torch.manual_seed(0)
    model, kwargs = BUILDERS[name](DEPTHS[name] if layers is None else layers)
    model = model.to(device).eval()
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    return model, kwargs
