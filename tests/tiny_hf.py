"""A tiny Hugging Face causal LM made on the spot, offline, for harness tests of the `hf` model type.

:func:`save_tiny_model` writes a random-weight GPT-2 (1 layer, 16 dimensions) and a byte-level BPE
tokenizer trained on a few strings with the ``tokenizers`` library into a folder: everything the
harness's ``hf`` model needs (``--model hf --model_args pretrained=FOLDER``), nothing downloaded.

The harness's ``hf`` model imports ``accelerate``; the ``test`` extra installs it.
"""

from __future__ import annotations

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



def main(argv: list[str] | None = None) -> int:
    """``python tests/tiny_hf.py FOLDER [JSONL] [--seed N]``: a tiny model to try the harness's ``hf`` type
    offline (README, "Multiple-choice tasks"), its tokenizer trained on the questions and choices of a
    multiple-choice JSONL file (default: the test task's)."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python tests/tiny_hf.py", description=main.__doc__)
    p.add_argument("folder")
    p.add_argument("jsonl", nargs="?", default=str(Path(__file__).with_name("tasks") / "tiny_mc" / "tiny_mc.jsonl"))
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    docs = [json.loads(x) for x in Path(a.jsonl).read_text().splitlines() if x.strip()]
    corpus = [f"Question: {d['question']}\nAnswer: {' '.join(map(str, d['choices']))}" for d in docs]
    print(save_tiny_model(Path(a.folder), corpus, seed=a.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
