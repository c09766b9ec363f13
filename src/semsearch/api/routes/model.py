"""The embedding model: a switch to another one, built beside the old while it keeps answering."""

from __future__ import annotations

from fastapi import APIRouter, Depends, status

from semsearch.api.auth import authenticate
from semsearch.api.deps import ADMIN, READ, EngineDep, SettingsDep
from semsearch.embedder.client import EmbedderClient
from semsearch.schemas import ModelSwitch, ModelSwitchIn

router = APIRouter(prefix="/v1", tags=["model"], dependencies=[Depends(authenticate)])


@router.post("/model/switch", status_code=status.HTTP_202_ACCEPTED, dependencies=[ADMIN])
def switch_model(body: ModelSwitchIn, engine: EngineDep, settings: SettingsDep) -> ModelSwitch:
    """Re-embed the index with the model the embedder at `embedder` serves, beside the current
    vectors (which keep answering), then swap both at once. Returns at once; `GET` follows it.
    Sent again after the API stopped, the same switch resumes where it was."""
    target = EmbedderClient(body.embedder, timeout=settings.embedder_timeout_s)
    try:
        target.info()  # a wrong address is an answer now, not a failed switch later
        return engine.switch_model(target, body.embedder, wait=False)
    except Exception:
        target.close()
        raise


@router.get("/model/switch", dependencies=[READ])
def model_switch(engine: EngineDep) -> ModelSwitch:
    """The switch under way, or the last one (`state: none` when there was none)."""
    return engine.model_switch()


@router.delete("/model/switch", dependencies=[ADMIN])
def cancel_switch(engine: EngineDep) -> ModelSwitch:
    """Stop a switch and drop what it built; the index keeps its model."""
    return engine.cancel_switch()
