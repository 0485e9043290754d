"""The rest of a train YAML, as llm-foundry 0.22's ``train.py`` and Composer 0.32's ``Trainer`` read it.

:mod:`foundry_ext.catalog.preflight` checks the schedule, the callbacks and FSDP; this module checks what a typo
elsewhere does to a run, from the YAML alone (nothing is built, nothing heavy imported):

* top-level keys against llm-foundry's ``TrainConfig`` (``llmfoundry/utils/config_utils.py``,
  ``make_dataclass_and_log_config``): an unknown key stops ``train.py`` (``Unused parameters [...] found in cfg``)
  after the tokenizer is loaded and the data set up; a missing mandatory one (``model``, ``tokenizer``, ...) stops it
  with OmegaConf's ``MissingMandatoryValue``;
* ``model`` keys of ``mpt_causal_lm``: llm-foundry passes them to ``MPTConfig(**kwargs)``, a Hugging Face config that
  keeps any unknown key as an attribute it never reads: ``d_modle: 768`` trains the default 2048-wide model, silently;
* ``autoresume: true`` needs a ``run_name`` (Composer raises after the model is built; llm-foundry reads a blank one
  as none) and a ``save_folder``;
* ``max_duration`` without a unit: Composer reads an integer as epochs (a warning: it trains, maybe far longer).

``fsdp_config`` (FSDP1's keys and values as well as FSDP2's) is :mod:`foundry_ext.catalog.fsdp`'s, which the
pre-flight transform runs in training too. The tables are copies of the installed stack's;
``tests/catalog/test_train_config.py`` checks each against the real classes, so an upgrade that changes one fails
there first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from foundry_ext.config.errors import Problem, unknown_keys

__all__ = ["MPT_MODEL_KEYS", "REQUIRED_KEYS", "TRAIN_KEYS", "TRANSFORM_KEYS", "check_train_keys"]

#: ``llmfoundry.utils.config_utils.TRAIN_CONFIG_KEYS`` (the fields of ``TrainConfig``), llm-foundry 0.22.
TRAIN_KEYS = frozenset(
    (
        "accumulate_train_batch_on_tokens", "algorithms", "autoresume", "callbacks", "code_paths", "compile_config",
        "console_log_interval", "cuda_load_lazy", "device_eval_batch_size", "device_train_batch_size",
        "device_train_grad_accum", "device_train_microbatch_size", "dist_timeout", "eval_first", "eval_gauntlet",
        "eval_gauntlet_str", "eval_interval", "eval_loader", "eval_loaders", "eval_subset_num_batches",
        "expandable_segments", "flatten_metadata", "fsdp_config", "global_train_batch_size", "icl_seq_len",
        "icl_subset_num_batches", "icl_tasks", "icl_tasks_str", "load_ignore_keys", "load_path",
        "load_strict_model_weights", "load_weights_only", "log_config", "log_to_console", "loggers", "max_duration",
        "max_seq_len", "max_split_size_mb", "metadata", "model", "n_gpus", "only_composer_checkpoint",
        "only_hf_checkpoint", "optimizer", "precision", "profiler", "progress_bar", "python_log_level", "run_name",
        "save_filename", "save_folder", "save_ignore_keys", "save_interval", "save_latest_filename",
        "save_num_checkpoints_to_keep", "save_overwrite", "save_weights_only", "scheduler", "seed",
        "spin_dataloaders", "tokenizer", "tp_config", "train_loader", "train_subset_num_batches", "variables",
    )
)  # fmt: skip

#: Top-level keys this package's own config transforms (``llmfoundry_config_transforms``) take out of the config
#: before llm-foundry checks its keys: the batch-size ramp's block (``foundry_ext.catalog.batch_size``).
TRANSFORM_KEYS = frozenset(("batch_size_schedule",))

#: ``TrainConfig``'s ``MISSING`` fields a user must give; the others (``device_train_batch_size``, ``n_gpus``, ...)
#: are filled in from ``global_train_batch_size`` by llm-foundry's ``update_batch_size_info`` transform, which needs
#: it. ``scheduler`` and ``max_duration`` are reported by the schedule's own checks.
REQUIRED_KEYS = ("model", "tokenizer", "optimizer", "train_loader", "max_seq_len", "global_train_batch_size")

#: What ``model`` may hold for ``name: mpt_causal_lm``: ``train.py`` pops ``name`` and ``master_weights_dtype``;
#: ``ComposerMPTCausalLM`` takes three keys and gives the rest to ``MPTConfig``: its own parameters and the generic
#: keys of transformers 4.51's ``PretrainedConfig``.
MPT_MODEL_KEYS = frozenset(
    (
        "name", "master_weights_dtype", "use_train_metrics", "additional_train_metrics", "loss_fn",
        # MPTConfig.__init__
        "d_model", "n_heads", "n_layers", "head_dim", "expansion_ratio", "max_seq_len", "vocab_size", "resid_pdrop",
        "emb_pdrop", "learned_pos_emb", "attn_config", "ffn_config", "init_device", "logit_scale", "no_bias",
        "attention_bias", "embedding_fraction", "norm_type", "norm_eps", "use_cache", "init_config", "fc_type",
        "tie_word_embeddings", "use_pad_tok_in_ffn", "block_overrides", "final_logit_softcapping",
        # PretrainedConfig().to_dict()
        "_attn_implementation_autoset", "_name_or_path", "add_cross_attention", "architectures", "bad_words_ids",
        "begin_suppress_tokens", "bos_token_id", "chunk_size_feed_forward", "cross_attention_hidden_size",
        "decoder_start_token_id", "diversity_penalty", "do_sample", "early_stopping", "encoder_no_repeat_ngram_size",
        "eos_token_id", "exponential_decay_length_penalty", "finetuning_task", "forced_bos_token_id",
        "forced_eos_token_id", "id2label", "is_decoder", "is_encoder_decoder", "label2id", "length_penalty",
        "max_length", "min_length", "model_type", "no_repeat_ngram_size", "num_beam_groups", "num_beams",
        "num_return_sequences", "output_attentions", "output_hidden_states", "output_scores", "pad_token_id",
        "prefix", "problem_type", "pruned_heads", "remove_invalid_values", "repetition_penalty", "return_dict",
        "return_dict_in_generate", "sep_token_id", "suppress_tokens", "task_specific_params", "temperature",
        "tf_legacy_loss", "tie_encoder_decoder", "tokenizer_class", "top_k", "top_p", "torch_dtype", "torchscript",
        "transformers_version", "typical_p", "use_bfloat16",
    )
)  # fmt: skip


def check_train_keys(
    cfg: Mapping[str, Any], *, fsdp_version: str | None = None, environ: Mapping[str, str] | None = None
) -> tuple[list[Problem], list[Problem], list[str]]:
    """``(errors, warnings, checked)`` of ``cfg`` outside the schedule and callbacks; ``checked`` says what was checked.

    Args:
        cfg (Mapping): The resolved train config (``variables`` interpolated, overrides merged).
        fsdp_version (str, optional): ``"2"`` for FSDP2. Default: ``FSDP_VERSION`` of ``environ``, as the Trainer reads.
        environ (Mapping, optional): The environment the run will have. Default: ``os.environ``.
    """
    env = os.environ if environ is None else environ
    version = fsdp_version if fsdp_version is not None else env.get("FSDP_VERSION", "1")
    errors: list[Problem] = []
    warnings: list[Problem] = []
    checked = [f"the top-level keys against llm-foundry's TrainConfig ({len(TRAIN_KEYS)} keys)"]
    errors += unknown_keys(
        cfg,
        TRAIN_KEYS | TRANSFORM_KEYS,
        "",
        ": llm-foundry's train.py stops on it ('Unused parameters'); put your own values under variables:",
    )
    for key in REQUIRED_KEYS:
        if cfg.get(key) is None:
            errors.append(Problem(key, "missing; llm-foundry's train.py requires it"))
    model = cfg.get("model")
    if isinstance(model, Mapping) and model.get("name") == "mpt_causal_lm":
        checked.append("model keys (mpt_causal_lm: MPTConfig)")
        silently = ": MPTConfig keeps it without using it, so the run would silently train without it"
        errors += unknown_keys(model, MPT_MODEL_KEYS, "model", silently)
    if isinstance(cfg.get("fsdp_config"), Mapping) and version != "2":
        # checked by catalog.fsdp.check_fsdp, which validate and the pre-flight transform both run
        checked.append("fsdp_config (FSDP1: Composer's FSDPConfig)")
    errors += _autoresume_problems(cfg, env)
    duration = cfg.get("max_duration")
    if isinstance(duration, int) and not isinstance(duration, bool):
        warnings.append(
            Problem(
                "max_duration",
                f"{duration} has no unit: Composer reads it as {duration}ep ({duration} epochs); write "
                f"{duration}ep to say so, or {duration}ba for batches",
            )
        )
    return errors, warnings, checked


def _autoresume_problems(cfg: Mapping[str, Any], env: Mapping[str, str]) -> list[Problem]:
    if cfg.get("autoresume") is not True:
        return []
    problems = []
    # llm-foundry: `run_name if run_name else RUN_NAME`; Composer then tries COMPOSER_RUN_NAME and RUN_NAME
    if not cfg.get("run_name") and not env.get("RUN_NAME") and not env.get("COMPOSER_RUN_NAME"):
        shown = "missing" if cfg.get("run_name") is None else f"{cfg.get('run_name')!r} is blank"
        problems.append(
            Problem(
                "run_name",
                f"{shown}, but autoresume: true needs it (Composer stops after building the model: 'When "
                "autoresume=True, the `run_name` must be specified'); set run_name, or RUN_NAME in the environment",
            )
        )
    if not cfg.get("save_folder"):
        problems.append(
            Problem("save_folder", "missing, but autoresume: true resumes from the save_folder's latest checkpoint")
        )
    return problems
