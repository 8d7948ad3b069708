"""The demo page: a Gradio app over ``lifestack.training.demo`` (``python scripts/demo.py``).

Tabs: *Watch* (a model or a reference policy plays a seeded episode turn by turn, the
heuristic plays the same episode beside it), *Play it yourself* (a form, or raw JSON, per
turn) and, when the model is a training output folder, *Training run* (its plots and its
model card's tables). Gradio is imported inside the functions (the ``demo`` extra);
nothing here reaches the network: no analytics, no share link.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from lifestack.training import demo as D

STREAM_EVERY = 0.2  # seconds between the page updates of a model's answer while it generates
INTRO = ("Pick a task family, a difficulty and a seed, then watch a player resolve the episode turn by turn: the "
         "state it saw, its JSON answer, what the environment made of it, the task reward with its parts and the six "
         "GRPO rewards. The heuristic plays the same episode on the right. Each reward lies in [-1, 1]; "
         "a turn's weighted total is their sum with the weights shown.")


def _gradio():
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    try:
        import gradio as gr
    except ImportError:
        raise SystemExit("the demo needs Gradio: pip install -e \".[demo]\"") from None
    return gr


def build_app(scorer: D.Scorer, model: Any = None, tokenizer: Any = None, model_name: str = "",
              run_dir: str | Path | None = None, default_player: str | None = None, max_new_tokens: int = 256,
              family: str = D.FAMILIES[0], difficulty: int = 3, seed: int = 7):
    """The page as a ``gradio.Blocks`` (not launched). ``model``/``tokenizer``: a loaded
    causal LM that joins the players as "model"; ``run_dir``: a training output folder
    shown on its own tab."""
    gr = _gradio()
    players = ([D.MODEL_PLAYER] if model is not None else []) + list(D.REFERENCE_PLAYERS)
    default_player = default_player or players[0]
    if default_player not in players:
        raise ValueError(f"player must be one of {', '.join(players)}, got {default_player!r}")
    model_label = f"model ({model_name})" if model_name else D.MODEL_PLAYER
    weights = dict(scorer.weights)
    # One answer at a time from the one model; a reference episode or a person's turn never waits for it.
    generating = threading.Lock()

    def label(player: str) -> str:
        return model_label if player == D.MODEL_PLAYER else player

    # -- Watch ------------------------------------------------------------------------
    def watch(player, family_, difficulty_, seed_, random_seed, context):
        try:
            seed_ = D.resolve_seed(seed_, random_seed)
            start = D.new_episode(family_, int(difficulty_), seed_)
            if player not in players:
                raise ValueError(f"player must be one of {', '.join(players)}")
        except (TypeError, ValueError) as exc:
            yield gr.update(), D.message_html(str(exc)), "", "", ""
            return
        header = D.scenario_html(start, family_)
        try:
            ref_views, ref_ep = [], start
            for ref_ep, view in D.play_policy(D.COMPARISON_PLAYER, family_, int(difficulty_), seed_, scorer):
                ref_views.append(view)
            ref_title = f"{D.COMPARISON_PLAYER} (same episode)"
            ref_summary = D.summary(ref_ep, ref_title)
            right = D.episode_html(ref_title, ref_views, weights, ref_summary)
            views: list[D.TurnView] = []
            title = label(player)
            yield seed_, header, D.message_html(f"{title} is playing...", "info-box"), \
                D.episode_html(title, views, weights), right
            if player == D.MODEL_PLAYER:
                ep = D.new_episode(family_, int(difficulty_), seed_)
                while not ep.done:
                    started, shown, text = time.monotonic(), 0.0, ""
                    read = D.model_messages(ep, context)
                    for text, finished in D.stream_completion(model, tokenizer, read, max_new_tokens, generating):
                        if not finished and time.monotonic() - shown >= STREAM_EVERY:
                            shown = time.monotonic()
                            pending = D.pending_html(len(views) + 1, text, started)
                            yield seed_, header, gr.update(), D.episode_html(title, views, weights, pending=pending), \
                                right
                    views.append(D.play_turn(ep, text, scorer, read))
                    yield seed_, header, gr.update(), D.episode_html(title, views, weights), right
            else:
                ep = start
                for ep, view in D.play_policy(player, family_, int(difficulty_), seed_, scorer):
                    views.append(view)
            mine = D.summary(ep, title)
            yield seed_, header, D.comparison_html([mine, ref_summary]), D.episode_html(title, views, weights, mine), \
                right
        except Exception as exc:  # a page shows a message, never a traceback
            yield seed_, header, D.message_html(f"something went wrong: {type(exc).__name__}: {exc}"), gr.update(), \
                gr.update()

    # -- Play it yourself ----------------------------------------------------------------
    def new_game(family_, difficulty_, seed_, random_seed):
        try:
            seed_ = D.resolve_seed(seed_, random_seed)
            game = D.HumanGame.start(family_, int(difficulty_), seed_)
        except (TypeError, ValueError) as exc:
            return None, gr.update(), "", "", D.message_html(str(exc)), "", gr.update(), gr.update(), gr.update()
        routes = ["(none)"] + [r.id for r in game.episode.task.viable_routes]
        return (game, seed_, D.scenario_html(game.episode, family_), D.situation_html(D.situation(game.episode.env)),
                D.message_html("Your turn: fill the form (or write the JSON) and play it.", "info-box"), "",
                gr.update(choices=routes, value="(none)"), gr.update(interactive=True), gr.update(interactive=True))

    def play(game, text, problem=None):
        # (game, state, message, history, and whether the two play buttons stay enabled);
        # ``problem``: why the form cannot be played, found before the parser (a typo costs no turn)
        same = gr.update()
        if game is None:
            return game, same, D.message_html("start an episode first (New episode)"), same, same, same
        if game.episode.done:  # the buttons are off by now; a late click keeps the summary
            return game, same, same, same, gr.update(interactive=False), gr.update(interactive=False)
        if problem is not None:
            return game, same, D.message_html(f"not a valid action: {problem}"), same, same, same
        try:
            view, reason = game.answer(text, scorer)
        except Exception as exc:  # a page shows a message, never a traceback
            return game, same, D.message_html(f"something went wrong: {type(exc).__name__}: {exc}"), same, same, same
        if view is None:
            return game, same, D.message_html(f"not a valid action: {reason}"), same, same, same
        ep = game.episode
        if ep.done:
            done = D.summary(ep, "you")
            msg = D.summary_html(done) + D.message_html("The episode is over: start a new one.", "info-box")
            state = ""
        else:
            msg = D.message_html(f"Turn {view.number} played: task reward {D.signed(view.task_reward)}. Your next "
                                 f"turn.", "info-box")
            state = D.situation_html(D.situation(ep.env))
        history = "".join(D.turn_html(v, weights, show_state=False) for v in reversed(game.turns))
        buttons = gr.update(interactive=not ep.done)
        return game, state, msg, history, buttons, buttons

    def play_form(game, action_type, domain, route, changes, hours, money, energy, reasoning):
        return play(game, D.form_action(action_type, domain, route, changes, hours, money, energy, reasoning),
                    D.form_problem(changes))

    # -- the page -------------------------------------------------------------------------
    with gr.Blocks(title="LifeStack demo", analytics_enabled=False) as app:
        gr.Markdown("# LifeStack: watch a policy resolve a life conflict\n" + INTRO)
        with gr.Tab("Watch", id="watch"):
            with gr.Row():
                w_player = gr.Dropdown([(label(p), p) for p in players], value=default_player, label="player",
                                       elem_id="ls-watch-who")
                w_family = gr.Dropdown(list(D.FAMILIES), value=family, label="task family", elem_id="ls-watch-family")
                w_difficulty = gr.Slider(1, 5, value=difficulty, step=1, label="difficulty",
                                         elem_id="ls-watch-difficulty")
                w_seed = gr.Number(value=seed, precision=0, label="seed", elem_id="ls-watch-seed")
                w_random = gr.Checkbox(value=False, label="random seed", elem_id="ls-watch-random")
                w_context = gr.Dropdown(list(D.CONTEXTS), value=D.CONTEXTS[0], visible=model is not None,
                                        label="the model reads", elem_id="ls-watch-context",
                                        info="fresh: the current state as one prompt (HORIZON = 1); conversation: "
                                             "the episode so far (episode mode)")
            w_go = gr.Button("Play the episode", variant="primary", elem_id="ls-watch-play")
            w_header = gr.HTML(elem_id="ls-watch-scenario")
            w_compare = gr.HTML(elem_id="ls-watch-comparison")
            with gr.Row(equal_height=False):
                w_left = gr.HTML(elem_id="ls-watch-player")
                w_right = gr.HTML(elem_id="ls-watch-reference")
            w_go.click(watch, [w_player, w_family, w_difficulty, w_seed, w_random, w_context],
                       [w_seed, w_header, w_compare, w_left, w_right])

        with gr.Tab("Play it yourself", id="human"):
            game = gr.State(None)
            with gr.Row():
                h_family = gr.Dropdown(list(D.FAMILIES), value=family, label="task family", elem_id="ls-human-family")
                h_difficulty = gr.Slider(1, 5, value=difficulty, step=1, label="difficulty",
                                         elem_id="ls-human-difficulty")
                h_seed = gr.Number(value=seed, precision=0, label="seed", elem_id="ls-human-seed")
                h_random = gr.Checkbox(value=False, label="random seed", elem_id="ls-human-random")
            h_new = gr.Button("New episode", elem_id="ls-human-new")
            h_header = gr.HTML(elem_id="ls-human-scenario")
            with gr.Row(equal_height=False):
                h_state = gr.HTML(elem_id="ls-human-state")
                with gr.Column():
                    with gr.Row():
                        f_type = gr.Dropdown(list(D.ACTION_CHOICES), value="rest", label="action type",
                                             elem_id="ls-form-type")
                        f_domain = gr.Dropdown(list(D.DOMAIN_CHOICES), value="mental_wellbeing", label="target domain",
                                               elem_id="ls-form-domain")
                        f_route = gr.Dropdown(["(none)"], value="(none)", label="route", elem_id="ls-form-route")
                    f_changes = gr.Textbox(lines=3, label="metric changes: one 'domain.metric: delta' per line",
                                           placeholder="mental_wellbeing.stress_level: -5\nphysical_health.sleep_quality: 3",
                                           elem_id="ls-form-changes")
                    with gr.Row():
                        f_time = gr.Number(value=1, label="time (hours)", elem_id="ls-form-time")
                        f_money = gr.Number(value=0, label="money ($)", elem_id="ls-form-money")
                        f_energy = gr.Number(value=0, label="energy", elem_id="ls-form-energy")
                    f_reasoning = gr.Textbox(lines=2, label="reasoning", elem_id="ls-form-reasoning")
                    f_go = gr.Button("Play this action", variant="primary", elem_id="ls-form-play")
                    with gr.Accordion("or write the JSON answer yourself", open=False):
                        j_text = gr.Textbox(lines=4, label="answer (what a model would write)",
                                            placeholder=D.schema_text(), elem_id="ls-json-text")
                        j_go = gr.Button("Play this answer", elem_id="ls-json-play")
            h_message = gr.HTML(elem_id="ls-human-message")
            h_history = gr.HTML(elem_id="ls-human-turns")
            new_outputs = [game, h_seed, h_header, h_state, h_message, h_history, f_route, f_go, j_go]
            h_new.click(new_game, [h_family, h_difficulty, h_seed, h_random], new_outputs)
            turn_outputs = [game, h_state, h_message, h_history, f_go, j_go]
            f_go.click(play_form, [game, f_type, f_domain, f_route, f_changes, f_time, f_money, f_energy, f_reasoning],
                       turn_outputs)
            j_go.click(play, [game, j_text], turn_outputs)
            app.load(new_game, [h_family, h_difficulty, h_seed, h_random], new_outputs)

        if D.is_run_folder(run_dir):
            with gr.Tab("Training run", id="run"):
                card = Path(run_dir) / "README.md"
                text = D.card_tables(card.read_text(encoding="utf-8")) if card.is_file() else ""
                gr.Markdown(f"`{Path(run_dir).name}`: " + ("its model card's tables" if text else "no model card yet"),
                            elem_id="ls-run-title")
                from PIL import Image

                for plot in D.run_plots(run_dir):  # whole, one under the other (they are wide)
                    gr.Image(Image.open(plot).convert("RGB"), type="pil", format="png", label=plot.name,
                             interactive=False, buttons=["download", "fullscreen"], elem_classes="ls-run-plot")
                if text:
                    gr.Markdown(text, elem_id="ls-run-card")
    return app


def launch(app, host: str = "127.0.0.1", port: int | None = None, block: bool = True, quiet: bool = False):
    """Serve the page on ``host:port`` (no share link, no analytics, no server-side
    rendering); ``block=False`` returns at once (tests close it with ``app.close()``)."""
    gr = _gradio()
    theme = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"],
                              font_mono=["ui-monospace", "monospace"])  # no web fonts: the page works offline
    return app.queue(default_concurrency_limit=4).launch(
        server_name=host, server_port=port, share=False, prevent_thread_lock=not block, quiet=quiet, ssr_mode=False,
        show_error=False, theme=theme, css=D.CSS, footer_links=[], mcp_server=False)
