"""HTTP serving of the tuned intent router (FastAPI under uvicorn).

`create_app` builds the app from a `ServeConfig` and a router loader; `serve` runs it.
The app is a thin layer: batching lives in `batcher.py`, metrics in `metrics.py`,
the feedback log in `feedback.py`, so each is testable on its own.
"""
