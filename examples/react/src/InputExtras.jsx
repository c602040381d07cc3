import { useEffect } from "react";
import { useTamboThreadInput, useTamboVoice } from "@tambo-ai/react";

/**
 * Attach images (sent to the model as `resource` blocks) and dictate with the microphone
 * (`useTamboVoice` posts the recording to the gateway's `POST /audio/transcribe`, which needs
 * GATEWAY_TRANSCRIPTION_MODEL); the transcript lands in the input box.
 */
export function InputExtras() {
  const { images, addImage, removeImage, setValue } = useTamboThreadInput();
  const { startRecording, stopRecording, isRecording, isTranscribing, transcript,
          transcriptionError, mediaAccessError } = useTamboVoice();

  useEffect(() => {
    if (transcript) setValue(transcript);
  }, [transcript, setValue]);

  return (
    <div className="input-extras">
      <label className="attach">
        Attach image
        <input type="file" accept="image/*" data-testid="attach" hidden
               onChange={async (event) => {
                 for (const file of event.target.files) await addImage(file);
                 event.target.value = "";
               }} />
      </label>
      {images.map((image) => (
        <span key={image.id} className="attachment" data-testid="attachment">
          {image.name}
          <button type="button" onClick={() => removeImage(image.id)}>×</button>
        </span>
      ))}
      <button type="button" data-testid="mic" data-recording={isRecording ? "true" : "false"}
              onClick={() => (isRecording ? stopRecording() : startRecording())}>
        {isRecording ? "Stop dictation" : isTranscribing ? "Transcribing…" : "Dictate"}
      </button>
      {transcriptionError || mediaAccessError ? (
        <span className="error" data-testid="voice-error">
          {transcriptionError || mediaAccessError}
        </span>
      ) : null}
    </div>
  );
}
