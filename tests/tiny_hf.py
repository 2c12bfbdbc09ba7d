"""A tiny Hugging Face causal LM made on the spot, offline, for harness tests of the `hf` model type.

:func:`save_tiny_model` writes a random-weight GPT-2 (1 layer, 16 dimensions) and a byte-level BPE
tokenizer trained on a few strings with the ``tokenizers`` library into a folder: everything the
harness's ``hf`` model needs (``--model hf --model_args pretrained=FOLDER``), nothing downloaded.

The harness's ``hf`` model imports ``accelerate`` (for multi-process runs). Where that package is
not installed, :func:`single_process_accelerate` puts a minimal single-process, CPU stand-in for
the three names it imports in its place (``Accelerator`` reporting one process on the CPU,
``InitProcessGroupKwargs``; ``find_executable_batch_size`` and ``get_max_memory`` refuse, they
serve ``batch_size=auto`` and ``parallelize``, which the tests do not use). The model's forward
passes and the harness's scoring are the real ones either way.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path

SPECIAL = "<|endoftext|>"


def save_tiny_model(folder: Path, corpus: list[str], *, seed: int = 0) -> Path:
    """A random-weight tiny GPT-2 and a tokenizer trained on ``corpus``, saved in ``folder``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.trainers import BpeTrainer
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainer=BpeTrainer(vocab_size=320, special_tokens=[SPECIAL],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIAL, eos_token=SPECIAL, unk_token=SPECIAL)
    hf_tok.save_pretrained(folder)
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(hf_tok), n_positions=256, n_embd=16, n_layer=1, n_head=2,
                     bos_token_id=hf_tok.bos_token_id, eos_token_id=hf_tok.eos_token_id)
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    return Path(folder)


def single_process_accelerate(monkeypatch) -> bool:
    """Install the stand-in ``accelerate`` (module docstring) when the package is missing; True if it did."""
    if importlib.util.find_spec("accelerate") is not None:
        return False
    import torch

    class Accelerator:
        num_processes = 1
        process_index = local_process_index = 0
        is_local_main_process = is_main_process = True
        device = torch.device("cpu")

        def __init__(self, *args, **kwargs):
            pass

    class InitProcessGroupKwargs:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    def refused(*args, **kwargs):
        raise RuntimeError("not available without the accelerate package (batch_size=auto, parallelize)")

    # a spec, no __file__ and no __version__: transformers' own check still finds no accelerate installed
    acc = types.ModuleType("accelerate")
    acc.__spec__ = importlib.machinery.ModuleSpec("accelerate", None)
    acc.Accelerator, acc.InitProcessGroupKwargs, acc.find_executable_batch_size = (
        Accelerator, InitProcessGroupKwargs, refused)
    utils = types.ModuleType("accelerate.utils")
    utils.__spec__ = importlib.machinery.ModuleSpec("accelerate.utils", None)
    utils.get_max_memory = refused
    acc.utils = utils
    monkeypatch.setitem(sys.modules, "accelerate", acc)
    monkeypatch.setitem(sys.modules, "accelerate.utils", utils)
    return True
