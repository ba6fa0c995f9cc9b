import pytest

from guitarformer.config import Config, apply_overrides, from_dict, load_config
from guitarformer.runs.migrate import RUN_FORMAT, migrate, read_saved
from guitarformer.runs.rundir import RunDir, RunState
from guitarformer.errors import GuitarformerError


def test_named_configs_load():
    for name in ("tiny", "decoder-small", "decoder-base", "encdec-small", "encdec-base"):
        cfg = load_config(name)
        assert cfg.model.n_embd % cfg.model.n_head == 0
        assert isinstance(cfg.train.lr, float)


def test_yaml_scientific_notation_string_is_a_float(tmp_path):
    # PyYAML reads 3e-4 (no dot) as a string
    p = tmp_path / "c.yaml"
    p.write_text("train:\n  lr: 3e-4\n  max_steps: 1e3\n")
    cfg = load_config(str(p))
    assert cfg.train.lr == pytest.approx(3e-4) and isinstance(cfg.train.lr, float)
    assert cfg.train.max_steps == 1000 and isinstance(cfg.train.max_steps, int)


def test_overrides_are_type_checked():
    cfg = apply_overrides(Config(), ["train.lr=1e-3", "model.kind=encoder_decoder", "train.compile=true",
                                     "data.dataset=none"])
    assert cfg.train.lr == 1e-3 and cfg.model.kind == "encoder_decoder" and cfg.train.compile is True
    assert cfg.data.dataset is None
    with pytest.raises(GuitarformerError, match="train.max_steps"):
        apply_overrides(Config(), ["train.max_steps=abc"])
    with pytest.raises(GuitarformerError, match="unknown config key model.n_layers"):
        apply_overrides(Config(), ["model.n_layers=3"])
    with pytest.raises(GuitarformerError, match="bad override"):
        apply_overrides(Config(), ["lr=3"])
    with pytest.raises(GuitarformerError, match="divisible"):
        apply_overrides(Config(), ["model.n_head=5"])


def test_unknown_section_and_bool_strictness():
    with pytest.raises(GuitarformerError, match="unknown config section"):
        from_dict({"optim": {"lr": 1}})
    with pytest.raises(GuitarformerError):
        from_dict({"train": {"compile": "maybe"}})


def test_roundtrip_through_dict():
    cfg = load_config("tiny")
    again = from_dict(cfg.to_dict())
    assert again == cfg


def test_missing_config_names_the_fix():
    with pytest.raises(GuitarformerError, match="not found"):
        load_config("no-such-config")


def test_config_defaults_are_the_default_preset():
    assert Config() == load_config("decoder-small") == load_config()
    assert from_dict({"model": {"n_layer": 2}}).model.prev_token is True  # a config file: the preset fills the rest
    # a run saved before the format was recorded (no state.json) was built without them
    old = migrate({"config": {"model": {"n_layer": 2}}}, 1)["config"]
    assert from_dict(old).model.prev_token is False and from_dict(old).model.copy is False


def test_every_change_is_validated():
    from guitarformer.config import set_values

    for bad in ("train.eval_interval=0", "train.log_interval=0", "sample.top_p=0", "sample.max_new_tokens=0",
                "train.warmup_steps=-1", "model.src_block_size=0", "data.transpose=-2", "train.beta2=1",
                "sample.form=sometimes"):
        with pytest.raises(GuitarformerError, match="invalid config"):
            apply_overrides(Config(), [bad])
    with pytest.raises(GuitarformerError, match="data.controls needs"):
        set_values(Config(), {"data.controls": True, "data.tokenizer": "REMI"})
    with pytest.raises(GuitarformerError, match="data.infill needs"):
        apply_overrides(Config(), ["data.tokenizer=REMI", "data.infill=0.3"])
    with pytest.raises(GuitarformerError, match="not a valid int"):
        set_values(Config(), {"train.batch_size": "many"})
    with pytest.raises(GuitarformerError, match="section.key"):
        set_values(Config(), {"lr": 1.0})


def test_the_preset_trains_with_controls_and_infilling_tab_tokens_only():
    """`guitarformer train` with no options learns controls and infilling; the preset's own values give way to a
    tokenizer that cannot carry them (REMI alone trains plain REMI), a bare DataConfig is plain tokens."""
    from guitarformer.config import DataConfig

    d = Config().data
    assert d.controls and d.infill == 0.3 and not DataConfig().controls and DataConfig().infill == 0
    remi = apply_overrides(Config(), ["data.tokenizer=REMI"]).data
    assert remi.tokenizer == "REMI" and not remi.controls and remi.infill == 0
    assert not apply_overrides(Config(), ["data.bpe_vocab_size=500"]).data.controls


def test_set_values_keeps_typed_strings_as_written():
    from guitarformer.config import set_values

    cfg = set_values(Config(), {"data.dataset": "null", "train.max_steps": 7})
    assert cfg.data.dataset == "null" and cfg.train.max_steps == 7  # a folder named "null" stays a folder
    assert apply_overrides(Config(), ["data.dataset=null"]).data.dataset is None  # as text it means None


def test_a_saved_run_keeps_what_it_did_for_settings_it_predates():
    """A run saved before data.control_plain existed trained without a plain share: loading (or resuming) it must not
    give it today's preset's 0.5, while a user's config file without the key does get the preset."""
    old = Config().to_dict()
    saved_config = lambda d: from_dict(migrate({"config": d}, 1)["config"])  # noqa: E731 (a format-1 run's config)
    del old["data"]["control_plain"]
    assert from_dict(old).data.control_plain == 0.5  # a config file: the preset fills what it does not say
    assert saved_config(old).data.control_plain == 0.0  # a run's saved config: what the run did
    old["data"]["control_plain"] = 0.4
    assert saved_config(old).data.control_plain == 0.4
    del old["data"]["control_targets"]  # a run from before it scored its control tokens; the preset does not
    assert from_dict(old).data.control_targets is False and saved_config(old).data.control_targets is True
    del old["data"]["piece_starts"]  # a run from before windows opened at a piece's first token on purpose
    assert saved_config(old).data.piece_starts == 0.0
    del old["sample"]["time_signature"]  # a run from before riffs' meters were drawn: its own, as it sampled then
    assert saved_config(old).sample.time_signature is None and from_dict(old).sample.time_signature == "auto"


def test_a_removed_setting_is_refused_when_asked_and_dropped_from_saved_runs():
    """train.max_minutes is gone (train.time_budget_min stops a run on the clock): a config or --set that asks for it
    is refused with what to do instead; an older config that left it off (0) and a run's saved config load."""
    with pytest.raises(GuitarformerError, match="train.max_minutes was removed") as e:
        apply_overrides(Config(), ["train.max_minutes=30"])
    assert "time_budget_min" in e.value.fix
    with pytest.raises(GuitarformerError, match="removed"):
        from_dict({"train": {"max_minutes": 5}})
    old = Config().to_dict()
    assert "max_minutes" not in old["train"]
    old["train"]["max_minutes"] = 0.0  # as every run saved before it went (the shipped model's config.yaml too)
    assert from_dict(old).train == Config().train
    old["train"]["max_minutes"] = 30.0  # a run that had a cap still loads and resumes (its budget, if any, stops it)
    assert from_dict(migrate({"config": old}, 1)["config"]).train == Config().train


def test_the_migration_moves_the_budget_into_the_run_state_and_records_the_format(tmp_path):
    """A format-1 run kept `train.budget_fitted` in its config: the migration moves it into the run's state; a run
    folder of this version says its format in state.json and its config is read as saved."""
    old = Config().to_dict()
    old["train"]["budget_fitted"] = True
    cfg, state = read_saved(old, RunDir(tmp_path))  # no state.json: format 1
    assert state == RunState(RUN_FORMAT, budget_fitted=True) and "budget_fitted" not in cfg.to_dict()["train"]
    RunDir(tmp_path).write_state(RunState())
    new = Config().to_dict()
    new["model"]["copy"] = False
    cfg, state = read_saved(new, RunDir(tmp_path))
    assert cfg.model.copy is False and cfg.model.prev_token is True and state == RunState()
