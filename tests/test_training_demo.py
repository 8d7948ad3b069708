"""lifestack.training.demo and scripts/demo.py without a browser: the page's episodes are the
package's episodes, scored by the training script's six rewards; a person's bad answer
gets the parser's reason; a run's card tables; the model's streamed answer; the Space files.
The page in a real browser: tests/test_demo_browser.py."""

from __future__ import annotations

import json
import random
import re
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from script_run import isolated  # noqa: E402,F401  (autouse: T.RUN logs and feedback under tmp_path)
import demo as S  # noqa: E402  (scripts/demo.py)
import train_trl as T  # noqa: E402
from lifestack.episodes import MAX_HORIZON, Episode, play  # noqa: E402
from lifestack.policies import HONEST  # noqa: E402
from lifestack.scenarios import sample_scenario  # noqa: E402
from lifestack.training import demo as D  # noqa: E402
from lifestack.training import model_card as MC  # noqa: E402
from lifestack.training.grpo_rewards import REWARD_NAMES, reward_vector  # noqa: E402
from lifestack.value import episode_reward  # noqa: E402

GOOD = ('{"action_type": "rest", "target_domain": "mental_wellbeing", "route": null, "metric_changes": '
        '{"mental_wellbeing.stress_level": -2}, "resource_cost": {"time": 1, "money": 0, "energy": 0}, '
        '"reasoning": "I rest for an hour to bring stress down; I pay 1 hour."}')


@pytest.fixture
def scorer():
    return S.scorer()


def in_process(policy: str, family: str, difficulty: int, seed: int) -> Episode:
    """The same episode, played with the package alone."""
    sc = sample_scenario(seed, difficulty, family)
    ep = Episode.from_scenario(sc, min(sc.task.horizon, MAX_HORIZON))
    rng = random.Random(seed)
    return play(ep, lambda e: HONEST[policy](e.env, rng))


@pytest.mark.parametrize("policy,family,difficulty,seed", [("heuristic", "flight_crisis", 3, 7),
                                                           ("random", "code_merge_crisis", 2, 4),
                                                           ("oracle", "flight_crisis", 1, 11)])
def test_a_policy_episode_is_the_package_episode_scored_by_the_six_rewards(scorer, policy, family, difficulty, seed):
    played = list(D.play_policy(policy, family, difficulty, seed, scorer))
    views = [v for _ep, v in played]
    ref = in_process(policy, family, difficulty, seed)
    assert [v.completion for v in views] == [t.completion for t in ref.turns]
    assert [v.task_reward for v in views] == [t.reward for t in ref.turns]
    assert [v.action for v in views] == [t.action for t in ref.turns]
    for v, t in zip(views, ref.turns):
        assert v.rewards == reward_vector(T.REWARD_FUNCS, t.completion, t.prompt)
        assert list(v.rewards) == list(REWARD_NAMES)
        assert v.total == pytest.approx(sum(w * v.rewards[n] for n, w in T.REWARD_WEIGHTS.items()))
        assert v.parts == [(k, x) for k, x in t.breakdown.items() if k.startswith(("component.", "penalty."))
                           and isinstance(x, float) and abs(x) > 1e-9]
    s = D.summary(played[-1][0], policy)
    assert s.outcome == ref.env.state.outcome and s.turns == len(ref.turns)
    assert s.episode_reward == episode_reward([t.reward for t in ref.turns], ref.outcome()["score"])


def test_scoring_on_the_page_is_neither_counted_nor_logged(scorer, isolated, monkeypatch):
    monkeypatch.setattr(T.RUN, "log_interval", 1)  # every counted evaluation would be logged
    for seed in range(3):
        list(D.play_policy("random", "flight_crisis", 2, seed, scorer))
    assert not (isolated / "generations.jsonl").exists()
    assert T.RUN.evaluations == 0 and T.RUN.signatures == {}


def test_the_first_turn_shows_the_state_as_a_person_reads_it(scorer):
    _ep, view = next(D.play_policy("heuristic", "flight_crisis", 3, 7, scorer))
    s = view.situation
    assert len(s.pressured) == D.PRESSURED_SHOWN and s.budget and s.routes and s.step >= 1
    assert any(r["status"] == "open" and r["next"] for r in s.routes)
    assert "GOAL:" in view.model_input and "<SYSTEM_METADATA>" not in view.model_input
    page = D.turn_html(view, T.REWARD_WEIGHTS)
    assert f"<b class='ls-task-reward'>{view.task_reward:+.3f}</b>" in page
    for name in REWARD_NAMES:
        assert re.search(rf"data-reward='{name}'>.*?ls-grpo-value'>" + re.escape(f"{view.rewards[name]:+.3f}<"), page)
    assert json.loads(re.search(r"<pre class='ls-action'>(.*?)</pre>", page, re.S).group(1).replace("&quot;", '"')) \
        == json.loads(view.completion)


def test_an_unreadable_answer_is_a_wasted_turn_and_is_shown_escaped(scorer):
    ep = D.new_episode("flight_crisis", 2, 3)
    view = D.play_turn(ep, "<script>alert(1)</script> I would wait", scorer)
    assert view.action is None and view.error == "no JSON object found" and view.task_reward == -0.5
    assert all(-1.0 <= x <= 1.0 for x in view.rewards.values()) and view.rewards["reward_format_fn"] < 0
    page = D.turn_html(view)
    assert "<script>" not in page and "&lt;script&gt;" in page and "not a valid action: no JSON object found" in page
    assert len(ep.turns) == 1  # time passed


@pytest.mark.parametrize("changes,reason", [
    ("career.workload: lots", "metric_changes[career.workload] is not a number"),
    ("career.workload", "metric_changes[career.workload] is not a number"),
    ('{"career.workload": -3', "metric_changes must be an object"),
])
def test_a_bad_form_gets_the_parsers_reason_and_costs_no_turn(scorer, changes, reason):
    game = D.HumanGame.start("flight_crisis", 3, 7)
    text = D.form_action("rest", "mental_wellbeing", "(none)", changes, 1, 0, 0, "rest")
    view, why = game.answer(text, scorer)
    assert view is None and why == reason
    assert game.episode.turns == [] and game.turns == []
    view, why = game.answer(D.form_action("dance", "mental_wellbeing", None, "", None, 0, 0, ""), scorer)
    assert view is None and why.startswith("unknown action_type 'dance'")
    view, why = game.answer("{not json", scorer)
    assert view is None and why.startswith("invalid JSON")


def test_a_good_form_plays_a_turn_as_its_json_would(scorer):
    text = D.form_action("rest", "mental_wellbeing", "(none)", "mental_wellbeing.stress_level: -2\n", 1, 0, 0,
                         "I rest for an hour to bring stress down; I pay 1 hour.")
    assert json.loads(text) == json.loads(GOOD)
    game = D.HumanGame.start("flight_crisis", 3, 7)
    view, why = game.answer(text, scorer)
    ref = D.new_episode("flight_crisis", 3, 7)
    turn = ref.step(GOOD)
    assert why is None and view.number == 1 and view.task_reward == turn.reward and view.info == turn.info
    while not game.episode.done:
        game.answer(GOOD, scorer)
    view, why = game.answer(GOOD, scorer)
    assert view is None and "over" in why


def test_metric_changes_are_read_from_lines_or_json():
    assert D.parse_changes("") == {}
    assert D.parse_changes("a.b: 3\nc.d = -1.5, e.f:+2") == {"a.b": 3, "c.d": -1.5, "e.f": 2}
    assert D.parse_changes('{"a.b": 1}') == {"a.b": 1}
    assert D.parse_changes("a.b: nan")["a.b"] != D.parse_changes("a.b: nan")["a.b"]  # NaN: the parser rejects it


def test_seeds_and_settings_are_checked():
    assert D.resolve_seed("12", False) == 12 and 0 <= D.resolve_seed(None, True) <= D.MAX_SEED
    for bad in (None, "x", -1, 2**40):
        with pytest.raises(ValueError, match="seed"):
            D.resolve_seed(bad, False)
    with pytest.raises(ValueError, match="family"):
        D.new_episode("tax_crisis", 2, 1)
    with pytest.raises(ValueError, match="difficulty"):
        D.new_episode("flight_crisis", 6, 1)
    with pytest.raises(ValueError, match="policy"):
        D.policy_answer("lazy", 1)
    with pytest.raises(ValueError, match="six reward functions"):
        D.Scorer(T.REWARD_FUNCS[:5], T.REWARD_WEIGHTS)
    with pytest.raises(ValueError, match="unknown rewards"):
        D.Scorer(T.REWARD_FUNCS, {"reward_typo_fn": 1.0})


def test_a_run_folder_shows_its_card_tables_and_plots(tmp_path):
    from test_training_publish import STAGES, SUMMARY, cfg_for

    card = MC.model_card(cfg_for(tmp_path, "--SEED=7"), T.default_config(), {"stages": STAGES}, SUMMARY, ["a.png"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "README.md").write_text(card, encoding="utf-8")
    (run / "b.png").write_bytes(b"")
    (run / "a.png").write_bytes(b"")
    assert D.is_run_folder(run) and not D.is_run_folder(tmp_path / "nothing") and not D.is_run_folder(None)
    assert [p.name for p in D.run_plots(run)] == ["a.png", "b.png"]
    tables = D.card_tables(card)
    assert "library_name" not in tables and "CPU pipeline check" in tables
    assert "### Curriculum" in tables and "| 2 | 1 | +0.650 | 100% | advance: +0.650 > 0.6 |" in tables
    assert "## Final evaluation" in tables and "| this model | +0.200 | 30% | 90% |" in tables
    assert "| `SEED` | `42` | `7` |" in tables and "Constants that differ" in tables
    assert "from_pretrained" not in tables  # prose and code are left out


def test_the_demo_script_binds_to_localhost_and_refuses_a_bad_model(tmp_path, capsys):
    args = S.parse_args([])
    assert args.host == "127.0.0.1" and args.model is None and args.policy is None
    assert S.parse_args(["--policy", "oracle", "--port", "8080"]).port == 8080
    with pytest.raises(SystemExit):
        S.parse_args(["--policy", "lazy"])
    with pytest.raises(SystemExit):
        S.parse_args(["--model", "x", "--policy", "heuristic"])
    assert S.main(["--model", str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_the_demo_scores_with_the_training_scripts_rewards():
    scorer = S.scorer()
    assert list(scorer.funcs) == list(T.REWARD_FUNCS) and dict(scorer.weights) == T.REWARD_WEIGHTS
    with scorer.quiet():
        assert T.RUN.phase == "rescore"


def test_a_models_answer_streams_and_ends_as_greedy_generation(tiny_model_dir, scorer):
    from evaluate import load
    from lifestack.training.generation import generate_completions

    model, tok = load(str(tiny_model_dir), device="cpu")
    ep = D.new_episode("code_merge_crisis", 2, 5)
    messages = D.model_messages(ep, "fresh")
    want = generate_completions(model, tok, [messages], 12)[0]
    tok.padding_side = "right"  # the demo asks for left padding itself
    lock, held = threading.Lock(), []
    original = model.generate

    def generate(*args, **kwargs):
        held.append(lock.locked())
        return original(*args, **kwargs)

    model.generate = generate
    items = list(D.stream_completion(model, tok, messages, 12, lock))
    assert items[-1] == (want, True) and all(not done for _text, done in items[:-1])
    assert held == [True] and not lock.locked()  # held for the generate call, released after it
    view = D.play_turn(ep, items[-1][0], scorer)
    assert view.number == 1 and set(view.rewards) == set(REWARD_NAMES)
    assert D.model_messages(ep, "conversation")[-1]["role"] == "user" or ep.done
    with pytest.raises(ValueError):
        D.model_messages(ep, "sideways")


def test_the_space_runs_the_demo_with_the_tested_versions():
    space = ROOT / "space"
    readme = (space / "README.md").read_text(encoding="utf-8")
    head = readme.split("---")[1]
    meta = dict(line.split(":", 1) for line in head.strip().splitlines() if ":" in line)
    meta = {k.strip(): v.strip().strip('"') for k, v in meta.items()}
    assert meta["sdk"] == "gradio" and (space / meta["app_file"]).is_file()
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    gradio_pin = re.search(r'demo = \[[^\]]*"gradio==([0-9.]+)"', pyproject).group(1)
    assert meta["sdk_version"] == gradio_pin
    pins = {re.split(r"[=<>]", line)[0]: line for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line and not line.startswith("#")}
    for line in (space / "requirements.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name = re.split(r"[=<>]", line)[0]
            assert pins.get(name, line) == line, f"space/requirements.txt pins {line}, requirements.txt {pins[name]}"
    sys.path.insert(0, str(space))
    try:
        import app as space_app
    finally:
        sys.path.remove(str(space))
    assert space_app.arguments({}) == ["--policy", "heuristic", "--host", "0.0.0.0", "--port", "7860"]
    assert space_app.arguments({"LIFESTACK_MODEL": "me/model", "GRADIO_SERVER_PORT": "9000"}) == \
        ["--model", "me/model", "--host", "0.0.0.0", "--port", "9000"]


def test_a_form_with_a_name_that_is_no_metric_is_refused_before_any_turn():
    assert D.form_problem("mental_wellbeing.stress_level: -5\ncareer.workload = 2") is None
    assert D.form_problem("") is None and D.form_problem('{"career.workload": -3') is None  # the parser's to judge
    assert "unknown metric 'mental_wellbeing.stres_level'" in D.form_problem("mental_wellbeing.stres_level: -5")
    assert "unknown metric" in D.form_problem("mental_wellbeing.stress_level -5")  # no colon: one unknown name
    assert "a decimal point, not a comma" in D.form_problem("mental_wellbeing.stress_level: 1,5")  # '5' is no metric


def test_the_demo_script_checks_its_seed_and_the_port_it_reads_from_the_environment(monkeypatch):
    with pytest.raises(SystemExit):
        S.parse_args(["--seed", "-1"])
    monkeypatch.setenv("GRADIO_SERVER_PORT", "8123")
    assert S.parse_args([]).port == 8123 and S.parse_args(["--port", "9000"]).port == 9000
    monkeypatch.setenv("GRADIO_SERVER_PORT", "abc")
    with pytest.raises(SystemExit):  # an argparse error, not a traceback
        S.parse_args([])


def test_a_turn_shows_what_its_player_read(scorer):
    ep = D.new_episode("flight_crisis", 3, 7)
    D.play_turn(ep, GOOD, scorer)
    conversation = D.model_messages(ep, "conversation")
    view = D.play_turn(ep, GOOD, scorer, conversation)
    assert view.model_input.startswith("RESULT OF YOUR ACTION")  # the environment's reply, not a fresh prompt
    assert "SYSTEM_METADATA" not in view.model_input and view.model_input in conversation[-1]["content"]


def test_the_play_buttons_turn_off_when_the_episode_ends_and_a_typo_costs_no_turn(scorer):
    pytest.importorskip("gradio")
    from lifestack.training.demo_app import build_app

    app = build_app(scorer)
    fns = {f.fn.__name__: f.fn for f in app.fns.values() if f.fn is not None}
    game, *rest = fns["new_game"]("flight_crisis", 3, 7, False)
    assert rest[-2]["interactive"] is True and rest[-1]["interactive"] is True
    out = fns["play_form"](game, "rest", "mental_wellbeing", "(none)", "mental_wellbeing.stres_level: -5", 1, 0, 0, "")
    assert "unknown metric" in out[2] and game.episode.turns == []
    while not game.episode.done:
        out = fns["play"](game, GOOD)
    assert "The episode is over" in out[2] and out[4]["interactive"] is False and out[5]["interactive"] is False
    late = fns["play"](game, GOOD)  # a click that got through keeps the summary and the buttons off
    assert late[2] == {"__type__": "update"} and late[4]["interactive"] is False
    bad_seed = fns["new_game"]("flight_crisis", 3, -1, False)
    assert bad_seed[2] == "" and "seed" in bad_seed[4]  # the message slot, not the header


def test_visitors_share_the_model_one_answer_at_a_time_and_a_reference_episode_never_waits(tiny_model_dir, scorer):
    """Two model episodes at once take turns on the model (one generate call at a time);
    a reference policy's episode plays to its end while a model answer is in progress."""
    pytest.importorskip("gradio")
    from evaluate import load
    from lifestack.training.demo_app import build_app

    model, tok = load(str(tiny_model_dir), device="cpu")
    original, count = model.generate, threading.Lock()
    inside, most = [0], [0]
    first_in, second_in, release = threading.Event(), threading.Event(), threading.Event()

    def generate(*args, **kwargs):
        with count:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            (second_in if first_in.is_set() else first_in).set()
        release.wait()  # the first answer stays in progress until the test lets it go
        try:
            return original(*args, **kwargs)
        finally:
            with count:
                inside[0] -= 1

    model.generate = generate
    app = build_app(scorer, model, tok, max_new_tokens=8)
    events = {f.fn.__name__: f for f in app.fns.values() if f.fn is not None}
    assert events["watch"].concurrency_limit != 1  # the page's queue runs several episodes at once
    outputs: dict[str, list] = {}

    def watch(name: str, player: str, seed: int) -> None:
        outputs[name] = list(events["watch"].fn(player, "flight_crisis", 1, seed, False, "fresh"))

    visitors = [threading.Thread(target=watch, args=(f"model {i}", D.MODEL_PLAYER, 7 + i), daemon=True)
                for i in range(2)]
    for visitor in visitors:
        visitor.start()
    assert first_in.wait(120)
    watch("heuristic", "heuristic", 7)  # here, while a model answer is held in generate
    assert "ls-comparison" in outputs["heuristic"][-1][2]
    # the other model episode waits for the lock, not inside generate (a broken lock lets it in at once)
    assert not second_in.wait(2.0) and inside[0] == 1
    release.set()
    for visitor in visitors:
        visitor.join(300)
    assert not any(v.is_alive() for v in visitors) and most[0] == 1
    for i in range(2):
        assert "ls-comparison" in outputs[f"model {i}"][-1][2]
