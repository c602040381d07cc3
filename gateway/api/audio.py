"""`POST /audio/transcribe`: voice input (`useTamboVoice`) as text.

The React SDK posts the recording as multipart field `file` (`recording.webm`, `audio/webm`)
and reads the answer as a plain string, so the transcript is sent as `text/plain`. The model is
`GATEWAY_TRANSCRIPTION_MODEL`, reached through litellm; without one the endpoint says how to
turn it on instead of pretending.
"""

from __future__ import annotations

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from ..engine.deltas import ModelError
from ..engine.models.transcription import Transcriber
from ..protocol.problems import ApiError, Problem
from .context import caller, services, user_scope
from .metered import metered

MAX_AUDIO_BYTES = 25 * 1024 * 1024
AUDIO_TYPES = ("audio/", "video/mp4", "video/webm", "application/octet-stream")


async def transcribe(request: Request) -> Response:
    caller(request)  # an API key (or bearer token) is needed, as for everything else
    settings = services(request).settings
    if not settings.transcription_model:
        raise ApiError(Problem.TRANSCRIPTION_DISABLED,
                       "Voice input is not enabled on this gateway: set "
                       "GATEWAY_TRANSCRIPTION_MODEL to a litellm transcription model (for "
                       "example openai/whisper-1; it uses GATEWAY_MODEL_API_BASE and "
                       "GATEWAY_MODEL_API_KEY)")
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise ApiError(Problem.UNSUPPORTED_MEDIA_TYPE,
                       "Send the audio as multipart/form-data with a `file` field")
    async with request.form(max_files=1, max_fields=10, max_part_size=MAX_AUDIO_BYTES) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise ApiError(Problem.VALIDATION_ERROR, "The audio must be in the `file` field")
        audio = await upload.read(MAX_AUDIO_BYTES + 1)
        content_type = (upload.content_type or "application/octet-stream").split(";")[0]
        filename = upload.filename or "audio.webm"
    if not audio:
        raise ApiError(Problem.VALIDATION_ERROR, "The audio file is empty")
    if len(audio) > MAX_AUDIO_BYTES:
        raise ApiError(Problem.PAYLOAD_TOO_LARGE, "The audio file is larger than 25 MiB")
    if not content_type.startswith(AUDIO_TYPES):
        raise ApiError(Problem.UNSUPPORTED_MEDIA_TYPE, f"{content_type} is not an audio type")
    transcriber = Transcriber(settings.transcription_model, settings.model_api_base,
                              settings.model_api_key.get_secret_value()
                              if settings.model_api_key else None)
    try:
        async with metered(request, user_scope(request)) as usage:
            text = await transcriber.transcribe(filename, audio, content_type, usage)
    except ModelError as exc:
        raise ApiError(Problem[exc.code], exc.message, isRetryable=exc.retryable) from None
    return PlainTextResponse(text)


routes = [Route("/audio/transcribe", transcribe, methods=["POST"])]
