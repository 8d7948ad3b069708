"""The learning check's verdict (``scripts/learning_check.py`` is the command): the judging
rule over the seeds' scores, the tables it prints, and the reports of a run, of a saved
run and of two saved runs against each other.

- :func:`paired` compares arms over the held-out prompts (pooled over seeds and samples):
  the task reward, the valid-JSON rate, decision quality among valid answers
  (:func:`decision_change`), regret against the oracle, imitation of the heuristic.
- :func:`closed_loop` compares closed-loop play over the episode starts;
  :func:`play_shortfalls` says where it fails the rule.
- :func:`summarise` applies the rule (the full check: decisions improve beyond noise and
  beat the control's; closed loop, success rises beyond noise, the episode reward is not
  worse beyond noise and beats the control's; no task family collapsed; with a teacher,
  success at its weakest difficulties beats the teacher's; ``quick``: a smoke check) and
  :func:`per_difficulty` tabulates every arm and reference per difficulty.
- :func:`format_table`, :func:`format_play`, :func:`format_per_difficulty`,
  :func:`play_rule` render them; :func:`report`, :func:`report_saved` and
  :func:`compare_runs` print a run's verdict, a saved run's and B against A.

Intervals are ``lifestack.training.episode_play.bootstrap_ci``'s, the one every report uses.
The arms and measurements are ``lifestack.training.learning_check``'s.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Sequence

from lifestack.training.learning_check import CONTROLS, METRICS, held_out, reference_play, reference_scores, settings
from lifestack.training.episode_play import bootstrap_ci

ADVANCING = ("advanced", "completed")  # route_status of a step that moved its route on


def spread(xs: list[float]) -> float:
    """The sample standard deviation over seeds (0 for one seed)."""
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def _mean(xs: list[float]) -> float | None:
    return statistics.mean(xs) if xs else None


def decision_change(results: list[dict], later: str, earlier: str) -> list[float]:
    """Per held-out prompt, the change of decision quality from arm ``earlier`` to arm
    ``later``: the task reward among the valid answers of one seed's arm minus that among
    the other's, averaged over the seeds where both arms parsed at least one answer.
    Prompts no seed answered validly in both arms are left out. Format is out of it: an
    unparseable answer is no decision."""
    out = []
    for i in range(len(results[0][earlier])):
        diffs = []
        for r in results:
            a = [x["task"] for x in r[later][i] if x["valid"]]
            b = [x["task"] for x in r[earlier][i] if x["valid"]]
            if a and b:
                diffs.append(statistics.mean(a) - statistics.mean(b))
        if diffs:
            out.append(statistics.mean(diffs))
    return out


def _interval(values: list[float]) -> dict:
    lo, hi = bootstrap_ci(values) if values else (None, None)
    return {"mean": _mean(values), "ci95": [lo, hi], "prompts": len(values)}


def paired(results: list[dict], refs: list[dict] | None = None) -> dict:
    """The paired comparison over prompts (pooled over seeds and samples)."""
    n_prompts = len(results[0]["answers_before"])
    arms = ["before", "after"] + (["control"] if all(r.get("answers_control") for r in results) else [])
    change = []
    valid = {k: [] for k in arms}
    valid_task = {k: [] for k in arms}
    regret = {k: [] for k in arms}  # per decision: oracle - task of each valid answer
    imitates = {k: [] for k in arms}  # per decision: it is the heuristic's own
    by_imitation = {k: {"same": [], "other": []} for k in arms}  # task reward of decisions that are / are not
    above = {k: [] for k in arms}  # per decision: it scores above the demonstrator's own on the prompt
    for i in range(n_prompts):
        diffs = []
        for r in results:
            for b, a in zip(r["answers_before"][i], r["answers_after"][i]):
                diffs.append(a["task"] - b["task"])
            for arm in arms:
                for x in r[f"answers_{arm}"][i]:
                    valid[arm].append(x["valid"])
                    if not x["valid"]:
                        continue
                    valid_task[arm].append(x["task"])
                    if refs:
                        regret[arm].append(refs[i]["oracle"] - x["task"])
                        above[arm].append(x["task"] > refs[i]["heuristic"] + 1e-9)
                        if "key" in x and "heuristic_key" in refs[i]:
                            same = x["key"] == refs[i]["heuristic_key"]
                            imitates[arm].append(same)
                            by_imitation[arm]["same" if same else "other"].append(x["task"])
        change.append(statistics.mean(diffs))
    lo, hi = bootstrap_ci(change)
    control = None
    if "control" in arms:
        vs = []
        for i in range(n_prompts):
            vs.append(statistics.mean(a["task"] - c["task"] for r in results
                                      for a, c in zip(r["answers_after"][i], r["answers_control"][i])))
        control = {"task_vs_control": statistics.mean(vs), "task_vs_control_ci95": list(bootstrap_ci(vs)),
                   "decision_vs_control": _interval(decision_change(results, "answers_after", "answers_control")),
                   "valid_rate": statistics.mean(valid["control"]), "task_among_valid": _mean(valid_task["control"])}
    out = {"prompts": n_prompts, "answers_per_arm": len(valid["before"]),
           "task_change": statistics.mean(change), "task_change_ci95": [lo, hi],
           "decision_change": _interval(decision_change(results, "answers_after", "answers_before")),
           "valid_rate": {k: statistics.mean(v) for k, v in valid.items() if k != "control"},
           "task_among_valid": {k: _mean(v) for k, v in valid_task.items() if k != "control"}, "control": control}
    if refs:
        out["decision_regret"] = {k: _mean(v) for k, v in regret.items()}
        out["imitation"] = {k: _mean([float(x) for x in v]) for k, v in imitates.items()}
        out["task_by_imitation"] = {k: {w: _mean(v) for w, v in d.items()} for k, d in by_imitation.items()}
        out["above_demonstrator"] = {k: _mean([float(x) for x in v]) for k, v in above.items()}
        out["oracle_task"] = statistics.mean(r["oracle"] for r in refs)
        out["heuristic_task"] = statistics.mean(r["heuristic"] for r in refs)
    return out


def won(row: dict) -> float:
    """1.0 for a closed-loop episode that finished its task, else 0.0."""
    return float(row["outcome"] == "success")


def above_zero(bound: float | None) -> bool:
    """Whether an interval's bound exists and lies above 0 (the rule's test, everywhere)."""
    return bound is not None and bound > 0


def _arm_play(rows: list[dict]) -> dict:
    """One arm's closed-loop play: episode reward, its first decision and its later ones
    (the states the policy's own earlier actions made), successes, and what the later
    decisions did to their routes."""
    first = [r["turn_rewards"][0] for r in rows if r.get("turn_rewards")]
    later = [x for r in rows for x in (r.get("turn_rewards") or [])[1:]]
    statuses = [x for r in rows for x in (r.get("route_statuses") or [])[1:]]
    share = lambda keys: (sum(x in keys for x in statuses) / len(statuses)) if statuses else None  # noqa: E731
    return {"episode_reward": _mean([r["reward"] for r in rows]), "first_decision": _mean(first),
            "later_decisions": _mean(later), "success_rate": _mean([won(r) for r in rows]),
            "later_advancing": share(ADVANCING), "later_wrong_step": share(("wrong_type",)),
            "later_invalid": share(("invalid",))}


def closed_loop(results: list[dict]) -> dict | None:
    """Closed-loop greedy play (the trainer's final evaluation) before vs after GRPO, paired
    over episode starts: per start the change of episode reward averaged over the seeds,
    with a 95 % bootstrap interval over the starts. None when the runs did not play any."""
    if not all(r.get("episodes_before") and r.get("episodes_after") for r in results):
        return None
    n = len(results[0]["episodes_before"])

    def reward(row: dict) -> float:
        return row["reward"]

    def change(later: str, earlier: str, value=reward) -> dict:
        """Per start, ``value`` of the later arm's episode minus the earlier's, averaged over
        the seeds; its mean and interval over the starts."""
        return _interval([statistics.mean(value(r[later][i]) - value(r[earlier][i]) for r in results)
                          for i in range(n)])

    arms = ["before", "after"] + (["control"] if all(r.get("episodes_control") for r in results) else [])
    control = "control" in arms
    return {"episodes": n, "change": change("episodes_after", "episodes_before"),
            "success_change": change("episodes_after", "episodes_before", won),
            "change_per_seed": [statistics.mean(a["reward"] - b["reward"] for a, b in
                                                zip(r["episodes_after"], r["episodes_before"])) for r in results],
            "vs_control": change("episodes_after", "episodes_control") if control else None,
            "success_vs_control": change("episodes_after", "episodes_control", won) if control else None,
            "arms": {arm: _arm_play([x for r in results for x in r[f"episodes_{arm}"]]) for arm in arms}}


def play_shortfalls(play: dict) -> list[str]:
    """Where closed-loop play fails the rule. Its success rate is the primary outcome (since
    2026-12-06): the paired change in success must have its 95 % interval above 0 (a
    policy that finishes no more tasks than before has not learned the job). Besides, its
    episode reward must not be worse than before GRPO beyond noise (the interval reaches
    above 0), and it must beat the control arm's (that interval's lower bound above 0)."""
    out = []
    success = play.get("success_change")
    if not above_zero(success["ci95"][0] if success else None):
        out.append("the success rate did not rise beyond noise")
    if not above_zero(play["change"]["ci95"][1]):
        out.append("episode reward is worse than before GRPO")
    vs = play.get("vs_control")
    if vs is not None and not above_zero(vs["ci95"][0]):
        out.append("episode reward does not beat the control arm's")
    return out


def per_difficulty(results: list[dict], refs: list[dict], ref_play: dict[str, list[dict]] | None) -> dict[int, dict]:
    """How far it gets, per difficulty: for each arm (the warm start, GRPO, the control when
    run) and the references (the heuristic, the greedy maximiser ``oracle``: the reward's
    ceiling) its decision quality (task reward among valid answers), regret against the
    oracle, valid-JSON rate on the held-out prompts, and closed-loop success rate on the
    final-evaluation starts of that difficulty."""
    arms = ["before", "after"] + (["control"] if all(r.get("answers_control") for r in results) else [])
    out: dict[int, dict] = {}
    for d in sorted({ref["difficulty"] for ref in refs}):
        idx = [i for i, ref in enumerate(refs) if ref["difficulty"] == d]
        row = {}
        for arm in arms:
            answers = [x for r in results for i in idx for x in r[f"answers_{arm}"][i]]
            valid = [x for x in answers if x["valid"]]
            regrets = [refs[i]["oracle"] - x["task"] for r in results for i in idx for x in r[f"answers_{arm}"][i]
                       if x["valid"]]
            games = [g for r in results for g in (r.get(f"episodes_{arm}") or []) if g.get("difficulty") == d]
            row[arm] = {"decision": _mean([x["task"] for x in valid]), "regret": _mean(regrets),
                        "valid": _mean([float(x["valid"]) for x in answers]),
                        "success": _mean([won(g) for g in games])}
        for name in ("heuristic", "oracle"):
            games = [g for g in (ref_play or {}).get(name, []) if g["difficulty"] == d]
            row[name] = {"decision": _mean([refs[i][name] for i in idx]),
                         "regret": _mean([refs[i]["oracle"] - refs[i][name] for i in idx]), "valid": 1.0,
                         "success": _mean([won(g) for g in games])}
        out[d] = row
    return out


ARM_NAMES = {"before": "warm start", "after": "GRPO", "control": "control", "heuristic": "heuristic",
             "oracle": "greedy maximiser"}


def format_per_difficulty(table: dict[int, dict]) -> list[str]:
    """The per-difficulty table as markdown: one row per difficulty, per arm decision quality
    / regret / valid JSON / closed-loop success."""
    if not table:
        return []
    arms = list(next(iter(table.values())))
    fmt = lambda x: "n/a" if x is None else f"{x:+.3f}"  # noqa: E731
    lines = ["", "per difficulty: decision quality / regret vs the greedy maximiser / valid JSON / closed-loop success",
             "| d | " + " | ".join(ARM_NAMES[a] for a in arms) + " |", "|---|" + "---:|" * len(arms)]
    for d, row in table.items():
        cells = [f"{fmt(row[a]['decision'])} / {fmt(row[a]['regret'])} / {_pct(row[a]['valid'])} / "
                 f"{_pct(row[a]['success'])}" for a in arms]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    return lines


TEACHER_DIFFICULTIES = (4, 5)  # where the heuristic teacher finishes fewest tasks


def beyond_teacher(results: list[dict], ref_play: dict[str, list[dict]] | None,
                   difficulties: tuple[int, ...] = TEACHER_DIFFICULTIES) -> dict | None:
    """The beyond-the-teacher comparison: on the final-evaluation starts of
    ``difficulties``, GRPO's closed-loop success against the heuristic's (the teacher a
    ``WARM_START_POLICY=heuristic`` run imitated) on the same starts, paired per start (GRPO
    averaged over the seeds), with its 95 % interval. None without the heuristic's play."""
    teacher = (ref_play or {}).get("heuristic")
    if not teacher or not all(r.get("episodes_after") for r in results):
        return None
    idx = [i for i, g in enumerate(teacher) if g["difficulty"] in difficulties]
    if not idx or any(len(r["episodes_after"]) != len(teacher) for r in results):
        return None
    change = _interval([statistics.mean(won(r["episodes_after"][i]) for r in results) - won(teacher[i]) for i in idx])
    return {"difficulties": list(difficulties), "starts": len(idx),
            "grpo_success": statistics.mean(won(r["episodes_after"][i]) for r in results for i in idx),
            "teacher_success": statistics.mean(won(teacher[i]) for i in idx), "change": change,
            "beyond": above_zero(change["ci95"][0])}


def summarise(results: list[dict], quick: bool = False, refs: list[dict] | None = None,
              ref_play: dict[str, list[dict]] | None = None, teacher: bool = False) -> dict:
    """The verdict on the seeds and every figure behind it: per metric the mean and spread
    over seeds before and after GRPO, the paired comparison (:func:`paired`, with the
    references ``refs`` when given), closed-loop play (:func:`closed_loop`), collapsed
    families, the per-difficulty table (with ``ref_play``), and ``passed``."""
    table = {}
    for m in METRICS:
        b = [r["before"][m] for r in results]
        a = [r["after"][m] for r in results]
        table[m] = {"before_mean": statistics.mean(b), "before_spread": spread(b),
                    "after_mean": statistics.mean(a), "after_spread": spread(a)}
    task = "reward_task_success_fn"
    deltas = [r["after"][task] - r["before"][task] for r in results]
    decision_deltas = [_mean(decision_change([r], "answers_after", "answers_before")) for r in results]
    pair = paired(results, refs)
    lo = pair["task_change_ci95"][0]
    decision_lo = pair["decision_change"]["ci95"][0]
    control = pair["control"]
    control_lo = control["decision_vs_control"]["ci95"][0] if control else None
    collapsed = sorted({f"seed {r['seed']}: {family}" for r in results
                        for family, d in (r.get("diversity_after") or {}).items() if d["collapsed"]})
    moved = all(r.get("answers_changed", 1.0) > 0 for r in results)
    finite = all(math.isfinite(x) for x in (pair["task_change"], lo, pair["task_change_ci95"][1]))
    # quick: a smoke check of the pipeline (8 prompts are too few for a verdict on learning).
    # full: decisions must improve (the task reward among valid answers, paired), not only
    # the format, and with a control arm GRPO's decisions must beat the control's.
    learned = above_zero(decision_lo) and (control is None or above_zero(control_lo))
    # ... and the trainer's own final evaluation (closed-loop greedy play) must finish more
    # tasks (success, paired, interval above 0), not get worse in reward beyond noise, and
    # beat the control's reward.
    play = closed_loop(results)
    play_ok = play is None or not play_shortfalls(play)
    # beyond the teacher (``teacher``, a heuristic warm start): GRPO must also finish more
    # tasks than the heuristic itself where it is weakest (paired interval above 0)
    beyond = beyond_teacher(results, ref_play) if teacher and not quick else None
    teacher_ok = not teacher or quick or (beyond is not None and beyond["beyond"])
    passed = (moved and finite if quick else learned and play_ok and teacher_ok) and not collapsed
    zero_std = [z for r in results for z in r["frac_reward_zero_std"] if z is not None]
    return {"table": table, "task_deltas": deltas, "decision_deltas": decision_deltas, "paired": pair, "passed": passed, "quick": quick,
            "collapsed": collapsed, "closed_loop": play, "closed_loop_ok": play_ok,
            "beyond_teacher": beyond, "teacher": teacher,
            "per_difficulty": per_difficulty(results, refs, ref_play) if refs and all("difficulty" in x for x in refs) else {},
            "mean_frac_reward_zero_std": statistics.mean(zero_std) if zero_std else None}


def format_table(summary: dict, n_seeds: int, control: str = "shuffled") -> str:
    """The printed report of :func:`summarise`'s summary: the metric table, then (a)-(c)
    and (e) (:func:`report` prints (d), the diversity) and the per-difficulty table; ``control`` names the control arm's kind."""
    lines = [f"| metric (mean ± spread over {n_seeds} seed{'s' if n_seeds > 1 else ''}) | before GRPO | after GRPO | change |",
             "|---|---:|---:|---:|"]
    for m, t in summary["table"].items():
        lines.append(f"| {m} | {t['before_mean']:+.3f} ± {t['before_spread']:.3f} | {t['after_mean']:+.3f} ± "
                     f"{t['after_spread']:.3f} | {t['after_mean'] - t['before_mean']:+.3f} |")
    p = summary["paired"]
    lo, hi = p["task_change_ci95"]
    lines.append("")
    lines.append(f"paired over {p['prompts']} held-out prompts: task reward change {p['task_change']:+.3f} "
                 f"(95% CI {lo:+.3f} .. {hi:+.3f})")
    tv = p["task_among_valid"]
    fmt = lambda x: "n/a" if x is None else f"{x:+.3f}"  # noqa: E731
    lines.append(f"(a) format: valid JSON {p['valid_rate']['before']:.0%} -> {p['valid_rate']['after']:.0%}")
    d = p["decision_change"]
    lines.append(f"(b) decisions: task reward among valid answers {fmt(tv['before'])} -> {fmt(tv['after'])}; "
                 f"paired change {_fmt_interval(d)}")
    if "decision_regret" in p:
        r = p["decision_regret"]
        lines.append(f"(c) regret per decision vs the oracle {fmt(r['before'])} -> {fmt(r['after'])} "
                     f"(oracle {p['oracle_task']:+.3f}, heuristic demonstrator {p['heuristic_task']:+.3f} on the same "
                     f"prompts); decisions equal to the demonstrator's {_pct(p['imitation']['before'])} -> "
                     f"{_pct(p['imitation']['after'])}")
        t = p["task_by_imitation"]
        lines.append(f"    task reward of decisions equal to the demonstrator's {fmt(t['before']['same'])} -> "
                     f"{fmt(t['after']['same'])}, of the others {fmt(t['before']['other'])} -> {fmt(t['after']['other'])}; "
                     f"decisions scoring above the demonstrator's on their prompt {_pct(p['above_demonstrator']['before'])} "
                     f"-> {_pct(p['above_demonstrator']['after'])}")
    c = p.get("control")
    if c:
        clo, chi = c["task_vs_control_ci95"]
        lines.append(f"GRPO vs the control arm ({CONTROLS[control]}): task reward "
                     f"{c['task_vs_control']:+.3f} (95% CI {clo:+.3f} .. {chi:+.3f}); decisions "
                     f"{_fmt_interval(c['decision_vs_control'])}; control after: valid JSON {c['valid_rate']:.0%}, "
                     f"task among valid {fmt(c['task_among_valid'])}")
    play = summary.get("closed_loop")
    if play:
        lines.extend(format_play(play))
    lines.extend(format_per_difficulty(summary.get("per_difficulty") or {}))
    return "\n".join(lines)


def format_play(play: dict) -> list[str]:
    """The (e) lines: closed-loop greedy play before vs after GRPO (and vs the control)."""
    b, a = play["arms"]["before"], play["arms"]["after"]
    fmt = lambda x: "n/a" if x is None else f"{x:+.3f}"  # noqa: E731
    both = lambda key, f: f"{f(b[key])} -> {f(a[key])}"  # noqa: E731
    d = play["change"]
    lines = [f"(e) closed-loop play (the trainer's final evaluation: greedy, whole episodes, {play['episodes']} starts, "
             f"difficulty 1-5): episode reward {both('episode_reward', fmt)}; paired change {d['mean']:+.3f} "
             f"(95% CI {d['ci95'][0]:+.3f} .. {d['ci95'][1]:+.3f}, {play['episodes']} episodes); per seed "
             f"{[round(x, 3) for x in play['change_per_seed']]}",
             f"    first decision {both('first_decision', fmt)}, later decisions {both('later_decisions', fmt)}; "
             f"success {both('success_rate', _pct)}{_success_interval(play)}; later decisions advancing their route {both('later_advancing', _pct)}, "
             f"naming a step their route no longer needs {both('later_wrong_step', _pct)}, unparseable "
             f"{both('later_invalid', _pct)}"]
    if play.get("vs_control"):
        v = play["vs_control"]
        w = play.get("success_vs_control")  # absent from a summary an older version saved
        success = "" if not w else (f"; success {_pct(a['success_rate'])} vs the control's "
                                    f"{_pct(play['arms']['control']['success_rate'])} (paired change {w['mean']:+.1%}, "
                                    f"95% CI {w['ci95'][0]:+.1%} .. {w['ci95'][1]:+.1%})")
        lines.append(f"    GRPO vs the control arm in closed-loop play: {v['mean']:+.3f} (95% CI {v['ci95'][0]:+.3f} .. "
                     f"{v['ci95'][1]:+.3f}); control episode reward {fmt(play['arms']['control']['episode_reward'])}"
                     + success)
    return lines


def _success_interval(play: dict) -> str:
    d = play.get("success_change")
    if not d or d["mean"] is None:
        return ""
    return f" (paired change {d['mean']:+.1%}, 95% CI {d['ci95'][0]:+.1%} .. {d['ci95'][1]:+.1%})"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def _fmt_interval(d: dict) -> str:
    if d["mean"] is None:
        return "n/a (no prompt with valid answers in both arms)"
    lo, hi = d["ci95"]
    return f"{d['mean']:+.3f} (95% CI {lo:+.3f} .. {hi:+.3f}, {d['prompts']} prompts)"


def play_rule(summary: dict) -> str:
    play = summary.get("closed_loop")
    if not play:
        return ""
    rule = ""
    if play.get("success_change"):
        rule += (f"; closed-loop success (e), the primary outcome, must rise: the 95% CI of its paired change above 0 "
                 f"(lower bound {play['success_change']['ci95'][0]:+.1%})")
    rule += (f"; closed-loop episode reward must not get worse beyond noise: its 95% CI must reach above 0 (upper "
             f"bound {play['change']['ci95'][1]:+.3f})")
    if play.get("vs_control"):
        rule += (f"; GRPO must beat the control in closed-loop play: 95% CI above 0 (lower bound "
                 f"{play['vs_control']['ci95'][0]:+.3f})")
    return rule


def fmt_bound(d: dict) -> str:
    lo = d["ci95"][0]
    return "n/a" if lo is None else f"{lo:+.3f}"


def report(T, results: list[dict], s: dict, quick: bool, control: str | None, teacher: bool = False) -> dict:
    """Summarise the seeds, print the report and the verdict; returns the summary. ``T``:
    the training script's module, which scores the reference policies on the held-out
    prompts and plays them on the closed-loop starts."""
    refs = reference_scores(T, held_out(s))
    ref_play = reference_play(T, len(results[0].get("episodes_before") or [])) if not quick else None
    summary = summarise(results, quick=quick, refs=refs, ref_play=ref_play, teacher=teacher)
    print(format_table(summary, len(results), control or "shuffled"))
    if summary["mean_frac_reward_zero_std"] is not None:
        print(f"mean frac_reward_zero_std over training: {summary['mean_frac_reward_zero_std']:.3f}")
    verdict = "PASS" if summary["passed"] else "FAIL"
    p = summary["paired"]
    rule = ("quick smoke check: the run completes, the policy's answers changed, no collapse "
            "(8 prompts are too few for a verdict on learning; run the full check for that)" if quick
            else "the 95% CI of the paired change of decision quality (b) must exclude 0 (lower bound "
            + fmt_bound(p["decision_change"]) + ")"
            + (", and so must GRPO's decisions vs the control's (lower bound "
               + fmt_bound(p["control"]["decision_vs_control"]) + ")" if p["control"] else "")
            + play_rule(summary))
    for r in results:
        parts = [f"{f} {d['distinct']} distinct of {d['answers']}, route fits "
                 + ("n/a" if d["route_fits"] is None else f"{d['route_fits']:.0%}")
                 for f, d in (r.get("diversity_after") or {}).items()]
        print(f"answer diversity after GRPO, seed {r['seed']}: {'; '.join(parts) or 'no parsed answer'}")
    if not quick and not summary["closed_loop_ok"]:
        print("FAIL: closed-loop play (e), the trainer's own final evaluation: "
              + "; ".join(play_shortfalls(summary["closed_loop"])))
    if teacher and not quick:
        b = summary["beyond_teacher"]
        if b is None:
            print("FAIL: beyond the teacher: no closed-loop play to set beside the heuristic's")
        else:
            print(f"{'beyond the teacher' if b['beyond'] else 'FAIL: not beyond the teacher'}: closed-loop success at difficulties "
                  f"{'-'.join(map(str, b['difficulties']))} ({b['starts']} starts): GRPO {b['grpo_success']:.0%} vs the "
                  f"heuristic {b['teacher_success']:.0%}, paired change {b['change']['mean']:+.1%} (95% CI "
                  f"{b['change']['ci95'][0]:+.1%} .. {b['change']['ci95'][1]:+.1%}; must lie above 0)")
    if summary["collapsed"]:
        print(f"FAIL: the policy collapsed onto one answer while the tasks vary ({', '.join(summary['collapsed'])})")
    per_seed = lambda xs: [None if d is None else round(d, 3) for d in xs]  # noqa: E731
    print(f"{verdict}: change per seed: task reward {per_seed(summary['task_deltas'])}, decision quality "
          f"{per_seed(summary['decision_deltas'])}; {rule}")
    return summary


def pooled_saved(docs: Sequence[Any]) -> tuple[list[dict], dict]:
    """The seeds of one or more saved runs (parsed ``learning_check.json`` documents) and
    their settings. Runs of one recipe may be trained apart (a seed per process, on
    several machines) and judged together; ``ValueError`` when a document is not a saved
    run, when two differ in any setting (overrides included: a different recipe is not
    pooled), or when a seed appears twice."""
    results: list[dict] = []
    settings_: dict | None = None
    for doc in docs:
        seeds, s = doc["seeds"], doc["settings"]
        if not isinstance(s, dict) or not seeds or not all(isinstance(r, dict) and "answers_after" in r for r in seeds):
            raise ValueError("no saved seed with its answers")
        if settings_ is not None and s != settings_:
            diff = sorted(k for k in set(s) | set(settings_) if s.get(k) != settings_.get(k))
            raise ValueError(f"the runs differ in {', '.join(diff)}: not one recipe")
        settings_ = s
        results += seeds
    ids = [r.get("seed") for r in results]
    if len(set(map(str, ids))) != len(ids):
        raise ValueError(f"a seed appears twice: {ids}")
    return results, settings_ or {}


def report_saved(T, paths: Sequence[Path]) -> int:
    """``--from-json``: the report and verdict of one saved run, or of several runs of one
    recipe pooled (:func:`pooled_saved`), under today's rule."""
    try:
        results, s = pooled_saved([json.loads(Path(p).read_text()) for p in paths])
        quick = all(s.get(k) == v for k, v in settings(T, quick=True).items())
    except (OSError, ValueError, KeyError, TypeError) as e:
        names = ", ".join(map(str, paths))
        print(f"--from-json: {names}: not learning_check.json files of one recipe ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    control = s.get("control")
    control = "shuffled" if control is True else (control or None)  # files before --control=KIND saved a bool
    print(f"[learning check] {len(results)} saved seeds from {', '.join(map(str, paths))} "
          f"(seeds {[r['seed'] for r in results]}), judged with today's rule", flush=True)
    return 0 if report(T, results, s, quick, control, teacher=bool(s.get("beyond_teacher")))["passed"] else 1


def compare_runs(a_path: Path, b_path: Path) -> int:
    """``--versus A B``: run B's trained policy against run A's, seed by seed (the same
    seed warm-starts the same weights, so two recipes differ only in what GRPO did):
    decision quality paired over prompts, closed-loop play paired over starts, and each
    run's valid-JSON rate and mean share of zero-variance groups."""
    try:
        runs = [json.loads(p.read_text()) for p in (a_path, b_path)]
        by_seed = [{r["seed"]: r for r in run["seeds"]} for run in runs]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"--versus: not two learning_check.json files ({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    seeds = sorted(set(by_seed[0]) & set(by_seed[1]))
    if not seeds:
        print("--versus: the two runs share no seed", file=sys.stderr)
        return 2
    merged = [{"seed": seed, "answers_before": by_seed[0][seed]["answers_after"],
               "answers_after": by_seed[1][seed]["answers_after"],
               "episodes_before": by_seed[0][seed].get("episodes_after"),
               "episodes_after": by_seed[1][seed].get("episodes_after")} for seed in seeds]
    print(f"[learning check] B = {b_path} vs A = {a_path}, seeds {seeds} (after GRPO in both)")
    for name, run in (("A", runs[0]), ("B", runs[1])):
        rows = [by_seed[0 if name == "A" else 1][seed] for seed in seeds]
        zero = [z for r in rows for z in r.get("frac_reward_zero_std") or [] if z is not None]
        valid = [x["valid"] for r in rows for prompt in r["answers_after"] for x in prompt]
        print(f"  {name}: valid JSON {statistics.mean(valid):.0%}, mean frac_reward_zero_std "
              f"{statistics.mean(zero) if zero else float('nan'):.3f}, training overrides "
              f"{run.get('settings', {}).get('overrides', 'n/a')}")
    print(f"  decision quality B - A: {_fmt_interval(_interval(decision_change(merged, 'answers_after', 'answers_before')))}")
    play = closed_loop(merged)
    if play:
        d, w = play["change"], play["success_change"]
        print(f"  closed-loop episode reward B - A: {d['mean']:+.3f} (95% CI {d['ci95'][0]:+.3f} .. {d['ci95'][1]:+.3f}, "
              f"{play['episodes']} starts); success {_pct(play['arms']['before']['success_rate'])} (A) vs "
              f"{_pct(play['arms']['after']['success_rate'])} (B), paired change {w['mean']:+.1%} "
              f"(95% CI {w['ci95'][0]:+.1%} .. {w['ci95'][1]:+.1%})")
    return 0
