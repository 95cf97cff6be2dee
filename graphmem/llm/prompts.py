"""Prompt texts of the LLM operations, in one place.

Every system prompt names its operation on its first line (``graphmem op: <name>``): it keeps
logs readable and lets test servers answer per operation. Inputs are clipped so one huge memory
cannot blow the context window.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from graphmem.llm.schemas import Neighbour
from graphmem.models import TrajectoryStep

MAX_INPUT_CHARS = 12_000
MAX_STEP_CHARS = 600

JSON_ONLY = (
    "Reply with one JSON object and nothing else: no prose, no markdown fences. "
    "Use exactly the keys shown."
)

NOTE_FIELDS = f"""graphmem op: extract_note_fields
You organise an agent's long-term memory as Zettelkasten notes.
Given a note, return its attributes:
- "keywords": 3-8 salient content words or short phrases, most important first;
- "tags": 2-5 broad labels useful for filtering (e.g. "kitchen", "preference", "error");
- "context": ONE sentence describing what the note is about and when it matters;
- "category": one lower-case word such as fact, procedure, lesson, preference, event, question.
{JSON_ONLY}
Shape: {{"keywords": ["..."], "tags": ["..."], "context": "...", "category": "..."}}"""

TASK_KEYWORDS = f"""graphmem op: extract_keywords
You index tasks for retrieval. Extract the 3-8 keywords that identify what the task is about:
objects, places, goals and constraints; no filler words. Keep each keyword short.
{JSON_ONLY}
Shape: {{"keywords": ["..."]}}"""

DISTILL_SCRIPT = f"""graphmem op: distill_script
You turn an agent's trajectory into a reusable procedure for SIMILAR tasks.
Write abstract, numbered-ready instructions: one action per item, in order, general enough to
transfer (name object types and roles, not one-off ids, unless they matter), skipping detours,
repeated or useless actions. If the attempt failed, write the steps that should have been taken and
put what went wrong in "notes".
{JSON_ONLY}
Shape: {{"steps": ["...", "..."], "notes": ""}}"""

DISTILL_KNOWLEDGE = f"""graphmem op: distill_knowledge
You keep an agent's long-term memory as Zettelkasten notes. From one episode (a task, its steps
and how it ended), write down the FACTS it taught that will hold in OTHER tasks: where things
are or belong, what an action needs or does, what earned or cost reward. Group them by subject
(the thing, place or verb they are about). One short fact per item, stated plainly; no advice
about this one task, no step-by-step instructions. "retracts" lists facts the episode showed to
be wrong. Return no notes if it taught nothing that transfers.
{JSON_ONLY}
Shape: {{"notes": [{{"subject": "...", "facts": ["..."], "retracts": []}}]}}"""

REFLECT = f"""graphmem op: reflect
You review a FAILED attempt of an agent and write a short tip for next time.
If a successful attempt at a similar task is given, find the first step where the failed attempt
went a different way and say what to do instead ("prefer"); otherwise name the mistake to avoid
("avoid"). "failed_step" is the 0-based index of the step where it went wrong (or null).
"corrected_steps" is a corrected action sequence, or null if you cannot give one.
{JSON_ONLY}
Shape: {{"tip": "...", "polarity": "avoid" or "prefer", "failed_step": 0,
"corrected_steps": ["..."]}}"""

DECIDE_LINKS = f"""graphmem op: decide_links
You maintain links in an agent's memory graph (A-MEM memory evolution).
A new memory was added; its nearest existing neighbours are listed with their ids.
1. "links": the neighbours genuinely related to the new memory, each with a short "reason" and a
   "strength" between 0 and 1. Leave out neighbours that are only superficially similar.
   Set "newer_fact": true on a link when the new memory states a newer value of the same fact
   as that neighbour (same person or thing, the value changed: "moved to Lisbon" after "lives
   in Porto"), else false.
2. "updates": neighbours whose "context" sentence and/or "tags" should change in the light of the
   new memory (omit a field to keep it). Only use ids from the list.
{JSON_ONLY}
Shape: {{"links": [{{"id": "...", "reason": "...", "strength": 0.8, "newer_fact": false}}],
"updates": [{{"id": "...", "context": "...", "tags": ["..."]}}]}}"""


def repair(error: str, cut: bool) -> str:
    """The retry's request: what was wrong with the last reply, and how to answer instead."""
    if cut:
        return (
            "That reply was too long and was cut off before the JSON object closed. Answer "
            "again, much shorter. " + JSON_ONLY
        )
    return f"That reply was not valid ({error}). Fix exactly that. " + JSON_ONLY


def clip(text: str, limit: int = MAX_INPUT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked when cut."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 14] + " …[truncated]"


def render_steps(steps: Sequence[TrajectoryStep]) -> str:
    """Steps as numbered lines (0-based, matching ``failed_step``)."""
    budget = MAX_INPUT_CHARS // max(1, len(steps))
    per_step = max(80, min(MAX_STEP_CHARS, budget))
    lines = []
    for i, s in enumerate(steps):
        parts = []
        if s.thought.strip():
            parts.append(f"thought: {clip(s.thought, per_step)}")
        parts.append(f"action: {clip(s.action, per_step)}")
        if s.observation.strip():
            parts.append(f"observation: {clip(s.observation, per_step)}")
        if s.reward is not None:
            parts.append(f"reward: {s.reward:g}")
        lines.append(f"[{i}] " + " | ".join(parts))
    return "\n".join(lines)


def note_fields_user(text: str) -> str:
    return f"Note:\n{clip(text)}"


def task_keywords_user(task: str) -> str:
    return f"Task:\n{clip(task, 4000)}"


def distill_script_user(task: str, steps: Sequence[TrajectoryStep], success: bool) -> str:
    outcome = "succeeded" if success else "FAILED"
    return f"Task: {clip(task, 4000)}\nOutcome: the attempt {outcome}.\nTrajectory:\n" + (
        render_steps(steps) or "(no steps)"
    )


def distill_knowledge_user(task: str, steps: Sequence[TrajectoryStep], success: bool) -> str:
    return distill_script_user(task, steps, success)


def reflect_user(
    task: str,
    failed_steps: Sequence[TrajectoryStep],
    successful_steps: Sequence[TrajectoryStep] | None,
) -> str:
    text = f"Task: {clip(task, 4000)}\nFailed attempt:\n{render_steps(failed_steps) or '(none)'}"
    if successful_steps:
        text += f"\nSuccessful attempt at a similar task:\n{render_steps(successful_steps)}"
    return text


def decide_links_user(memory_text: str, neighbours: Sequence[Neighbour]) -> str:
    rows = [
        json.dumps(
            {
                "id": n.id,
                "sim": round(n.sim, 3),
                "text": clip(n.text, 800),
                "context": clip(n.context, 300),
                "tags": n.tags,
            },
            ensure_ascii=False,
        )
        for n in neighbours
    ]
    return f"New memory:\n{clip(memory_text, 4000)}\nNeighbours (one JSON per line):\n" + "\n".join(
        rows
    )
