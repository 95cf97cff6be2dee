"""Trajectories shared by the flow, LangGraph-server and MCP tests."""

TEA_TRAJECTORY = {
    "task": "make tea in the kitchen",
    "reward": 1.0,
    "success": True,
    "steps": [
        {"action": "fill kettle", "observation": "The kettle is full."},
        {"action": "boil water", "observation": "The water boils."},
        {"action": "pour water on tea bag", "observation": "Tea is ready."},
    ],
}
"""A successful three-step trajectory (the README's example)."""
