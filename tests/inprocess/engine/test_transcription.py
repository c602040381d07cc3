"""Speech to text through litellm's transcription API, against the scripted upstream's
`POST /audio/transcriptions` on loopback."""

from __future__ import annotations

from gateway.engine.deltas import ModelError
from gateway.engine.models.transcription import Transcriber
from gateway.services import load_litellm
from tests.support.gateway_server import free_port
from tests.support.scripted_model import ScriptedModel

load_litellm()
KEY = "sk-test-secret-key-1234"
AUDIO = b"RIFF" + b"\0" * 1020


async def test_the_spoken_text_comes_back_trimmed(scripted_model: ScriptedModel) -> None:
    scripted_model.enqueue_transcript("  What time is it in Paris?\n")
    transcriber = Transcriber("openai/whisper-1", scripted_model.base_url, KEY)

    text = await transcriber.transcribe("voice.wav", AUDIO, "audio/wav")

    assert text == "What time is it in Paris?"
    [heard] = scripted_model.transcriptions
    assert (heard["model"], heard["filename"], heard["size"]) == ("whisper-1", "voice.wav",
                                                                   len(AUDIO))


async def test_an_unreachable_provider_is_a_classified_error_without_the_key() -> None:
    transcriber = Transcriber("openai/whisper-1", f"http://127.0.0.1:{free_port()}/v1", KEY)
    try:
        await transcriber.transcribe("voice.wav", AUDIO, "audio/wav")
    except ModelError as error:
        assert error.code == "LLM_UNREACHABLE" and error.retryable
        assert KEY not in error.message
    else:
        raise AssertionError("a transcription with no provider succeeded")
