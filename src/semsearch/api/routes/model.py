"""The embedding model: a switch to another one, built beside the old while it keeps answering."""

from __future__ import annotations

from contextlib import closing

from fastapi import APIRouter, Depends, status

from semsearch.api.auth import authenticate, needs
from semsearch.api.deps import ADMIN, EngineDep, SettingsDep
from semsearch.embedder.client import EmbedderClient, EmbedderError
from semsearch.engine.switch import SwitchRefused
from semsearch.schemas import ModelSwitch, ModelSwitchIn

PROBE_S = 5.0  # an embedder on a reachable host answers Info in milliseconds

router = APIRouter(prefix="/v1", tags=["model"], dependencies=[Depends(authenticate)])


@router.post("/model/switch", status_code=status.HTTP_202_ACCEPTED, dependencies=[ADMIN])
def switch_model(body: ModelSwitchIn, engine: EngineDep, settings: SettingsDep) -> ModelSwitch:
    """Re-embed the index with the model the embedder at `embedder` serves, beside the current
    vectors (which keep answering), then swap both at once. Returns at once; `GET` follows it.
    Sent again after the API stopped, the same switch resumes where it was."""
    # A wrong address is an answer now (the caller's to fix), not a failed switch later.
    try:
        with closing(EmbedderClient(body.embedder, timeout=PROBE_S)) as probe:
            probe.info()
    except EmbedderError as exc:
        raise SwitchRefused(
            f"no embedder answered at {body.embedder} ({exc}); start one with the new model there "
            "(`semsearch embedder --model PATH --port N`) and send its host:port"
        ) from exc
    target = EmbedderClient(body.embedder, timeout=settings.embedder_timeout_s)
    try:
        return engine.switch_model(target, body.embedder, wait=False)
    except Exception:
        target.close()
        raise


@router.get("/model/switch", dependencies=[Depends(needs("read", every_folder=True))])
def model_switch(engine: EngineDep) -> ModelSwitch:
    """The switch under way, or the last one (`state: none` when there was none); for tokens that
    cover every folder (it counts the whole index's chunks)."""
    return engine.model_switch()


@router.delete("/model/switch", dependencies=[ADMIN])
def cancel_switch(engine: EngineDep) -> ModelSwitch:
    """Stop a switch and drop what it built; the index keeps its model."""
    return engine.cancel_switch()
