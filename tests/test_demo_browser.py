"""scripts/demo.py in a real browser: the page is served on a free localhost port and driven
with headless Chromium (Selenium, with the system's chromium and chromedriver).

The turns, answers and rewards the page shows for a seeded heuristic episode must be those
of the same episode played in-process with the package; a malformed action must show the
parser's message. Without Chromium (or the ``demo``/``browser`` extras) these tests skip,
except under CI (``CI`` set, or ``LIFESTACK_BROWSER_TESTS=required`` as ``.ci/run`` sets
it), where that is a failure.

``LIFESTACK_DEMO_SCREENSHOT=docs/img/demo.png`` also writes the page's screenshot there
(the one README shows).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WAIT = 120  # seconds an element may take to appear (a loaded 2-core machine; never a speed assertion)
FAMILY, DIFFICULTY, SEED = "flight_crisis", 3, 8  # the seed the test types in (the page opens on another)
# Gradio's queue calls pandas options that pandas 3 deprecates: not this project's code
pytestmark = [pytest.mark.filterwarnings("ignore:'future.no_silent_downcasting' is deprecated"),
              pytest.mark.filterwarnings("ignore:The copy keyword is deprecated")]


def required() -> bool:
    """Under CI the browser tests must run: a missing browser fails them."""
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    return ci or os.environ.get("LIFESTACK_BROWSER_TESTS", "").strip().lower() == "required"


def unavailable(reason: str):
    """Skip, or fail under CI: there the browser tests must run."""
    if required():
        pytest.fail(f"{reason} (under CI the browser tests must run; .ci/run installs what they need)")
    pytest.skip(reason)


def chromium() -> tuple[str, str]:
    browser = next((p for p in map(shutil.which, BROWSERS) if p), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        unavailable("no Chromium and chromedriver on PATH (Debian: apt-get install chromium chromium-driver)")
    return browser, driver


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The demo, as ``python scripts/demo.py --policy heuristic`` starts it, on a free port."""
    browser, driver_path = chromium()
    for module in ("gradio", "selenium"):
        try:
            __import__(module)
        except ImportError:
            unavailable(f"{module} is not installed (pip install -e \".[demo,browser]\")")
    mp = pytest.MonkeyPatch()
    mp.setenv("GRADIO_ANALYTICS_ENABLED", "False")
    mp.setenv("LIFESTACK_FEEDBACK_DB", str(tmp_path_factory.mktemp("feedback") / "fb.sqlite3"))
    import demo as S
    import train_trl as T
    from lifestack.training.context import FeedbackSource
    from lifestack.training.demo_app import launch

    mp.setattr(T.RUN, "feedback", FeedbackSource())  # what scorer() configures, restored after
    port = free_port()
    args = S.parse_args(["--policy", "heuristic", "--port", str(port)])
    assert args.host == "127.0.0.1"
    app = S.build(args)
    launch(app, args.host, args.port, block=False, quiet=True)

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000",
              "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    drv = None
    try:
        drv = webdriver.Chrome(service=Service(driver_path), options=opts)
        drv.get(f"http://127.0.0.1:{port}/")
        yield drv
    finally:
        if drv is not None:
            drv.quit()
        app.close()
        mp.undo()


def wait_for(drv, css: str, what=lambda els: len(els) > 0):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(drv, WAIT).until(lambda d: (lambda els: els if what(els) else False)(
        d.find_elements(By.CSS_SELECTOR, css)))


def type_into(drv, css: str, text: str) -> None:
    from selenium.webdriver.common.keys import Keys

    box = wait_for(drv, css)[0]
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.DELETE)
    box.send_keys(text)


def in_process():
    """The seeded heuristic episode played with the package alone, and its six rewards per turn."""
    import train_trl as T
    from lifestack.episodes import MAX_HORIZON, Episode, play
    from lifestack.policies import heuristic
    from lifestack.scenarios import sample_scenario
    from lifestack.training.grpo_rewards import reward_vector
    from lifestack.value import episode_reward

    sc = sample_scenario(SEED, DIFFICULTY, FAMILY)
    ep = Episode.from_scenario(sc, min(sc.task.horizon, MAX_HORIZON))
    rng = random.Random(SEED)
    play(ep, lambda e: heuristic(e.env, rng))
    with T.RUN.in_phase("rescore"):
        vectors = [reward_vector(T.REWARD_FUNCS, t.completion, t.prompt) for t in ep.turns]
    reward = episode_reward([t.reward for t in ep.turns], ep.outcome()["score"])
    return ep, vectors, reward


def shown_turns(column) -> list[dict]:
    from selenium.webdriver.common.by import By

    out = []
    for el in column.find_elements(By.CSS_SELECTOR, ".ls-turn"):
        out.append({
            "turn": int(el.get_attribute("data-turn")),
            "answer": json.loads(el.find_element(By.CSS_SELECTOR, "pre.ls-action").get_attribute("textContent")),
            "task_reward": el.find_element(By.CSS_SELECTOR, ".ls-task-reward").text,
            "rewards": {r.get_attribute("data-reward"): r.find_element(By.CSS_SELECTOR, ".ls-grpo-value").text
                        for r in el.find_elements(By.CSS_SELECTOR, "tr[data-reward]")},
            "info": [li.get_attribute("textContent") for li in el.find_elements(By.CSS_SELECTOR, "ul.ls-info li")],
        })
    return out


def test_a_seeded_heuristic_episode_shows_what_the_package_plays(page):
    from selenium.webdriver.common.by import By

    drv = page
    type_into(drv, "#ls-watch-seed input", str(SEED))
    wait_for(drv, "#ls-watch-play")[0].click()
    wait_for(drv, "#ls-watch-comparison table.ls-comparison")
    assert drv.find_element(By.CSS_SELECTOR, "#ls-watch-scenario .ls-seed").text == str(SEED)

    ep, vectors, reward = in_process()
    want = [{"turn": i + 1, "answer": json.loads(t.completion), "task_reward": f"{t.reward:+.3f}",
             "rewards": {k: f"{v:+.3f}" for k, v in vec.items()}, "info": t.info}
            for i, (t, vec) in enumerate(zip(ep.turns, vectors))]
    for column in ("#ls-watch-player", "#ls-watch-reference"):  # the chosen player, and the heuristic beside it
        assert shown_turns(drv.find_element(By.CSS_SELECTOR, column)) == want, column
    rows = drv.find_elements(By.CSS_SELECTOR, "#ls-watch-comparison tr[data-player]")
    assert len(rows) == 2
    for row in rows:
        assert row.find_element(By.CSS_SELECTOR, ".ls-outcome").text == ep.env.state.outcome
        assert row.find_element(By.CSS_SELECTOR, ".ls-turns").text == str(len(ep.turns))
        assert row.find_element(By.CSS_SELECTOR, ".ls-episode-reward").text == f"{reward:+.3f}"

    shot = os.environ.get("LIFESTACK_DEMO_SCREENSHOT")
    if shot:
        save_screenshot(drv, Path(shot))


def test_a_malformed_action_shows_the_parsers_message_and_a_good_one_plays(page):
    from selenium.webdriver.common.by import By

    drv = page
    next(b for b in wait_for(drv, "button[role=tab]") if "Play it yourself" in b.text).click()
    wait_for(drv, "#ls-human-state .ls-situation")
    type_into(drv, "#ls-form-changes textarea", "career.workload: lots")
    wait_for(drv, "#ls-form-play")[0].click()
    error = wait_for(drv, "#ls-human-message .ls-error")[0]
    assert error.text == "not a valid action: metric_changes[career.workload] is not a number"
    assert drv.find_elements(By.CSS_SELECTOR, "#ls-human-turns .ls-turn") == []  # no turn was spent

    type_into(drv, "#ls-form-changes textarea", "mental_wellbeing.stress_level: -2")
    type_into(drv, "#ls-form-reasoning textarea", "I rest for an hour to bring stress down; I pay 1 hour.")
    wait_for(drv, "#ls-form-play")[0].click()
    turn = wait_for(drv, "#ls-human-turns .ls-turn")[0]

    from lifestack.training import demo as D

    ep = D.new_episode("flight_crisis", 3, 7)  # what the page opens on (scripts/demo.py's defaults)
    played = ep.step(D.form_action("rest", "mental_wellbeing", "(none)", "mental_wellbeing.stress_level: -2", 1, 0, 0,
                                   "I rest for an hour to bring stress down; I pay 1 hour."))
    assert turn.find_element(By.CSS_SELECTOR, ".ls-task-reward").text == f"{played.reward:+.3f}"
    assert json.loads(turn.find_element(By.CSS_SELECTOR, "pre.ls-action").get_attribute("textContent")) \
        == json.loads(played.completion)


def test_a_missing_browser_skips_locally_and_fails_under_ci(monkeypatch):
    monkeypatch.delenv("LIFESTACK_BROWSER_TESTS", raising=False)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="under CI the browser tests must run"):
        unavailable("no Chromium")
    for value in ("", "false", "0"):
        monkeypatch.setenv("CI", value)
        with pytest.raises(pytest.skip.Exception, match="no Chromium"):
            unavailable("no Chromium")
    monkeypatch.setenv("LIFESTACK_BROWSER_TESTS", "required")  # what .ci/run sets
    with pytest.raises(pytest.fail.Exception, match="under CI"):
        unavailable("no Chromium")


def save_screenshot(drv, path: Path) -> None:
    """The whole page, as an optimised palette PNG (README shows it)."""
    import io

    from PIL import Image

    height = drv.execute_script("return document.documentElement.scrollHeight")
    drv.set_window_size(1400, min(int(height) + 40, 2600))
    image = Image.open(io.BytesIO(drv.get_screenshot_as_png())).convert("RGB")
    path.parent.mkdir(parents=True, exist_ok=True)
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    drv.set_window_size(1400, 1000)
