import { useTamboSuggestions } from "@tambo-ai/react";

/**
 * Follow-up suggestions for the latest answer, on request.
 *
 * `autoGenerate: false` keeps the SDK from asking the model after every answer (each request is
 * a model call on the gateway); the button asks for them
 * (`POST /v1/threads/{id}/messages/{messageId}/suggestions`). Picking one puts its text in the
 * input box, ready to edit or send.
 */
export function Suggestions() {
  const { suggestions, generate, isGenerating, generateError, accept } = useTamboSuggestions({
    maxSuggestions: 3,
    autoGenerate: false,
  });
  return (
    <div className="suggestions" data-testid="suggestions">
      <button type="button" className="link" onClick={() => generate().catch(() => {})}
              disabled={isGenerating}>
        {isGenerating ? "Thinking of follow-ups…" : "Suggest follow-ups"}
      </button>
      {suggestions.map((suggestion) => (
        <button
          type="button"
          key={suggestion.id}
          className="chip"
          data-testid="suggestion"
          title={suggestion.detailedSuggestion}
          onClick={() => accept({ suggestion })}
        >
          {suggestion.title}
        </button>
      ))}
      {generateError ? <span className="error">{generateError.message}</span> : null}
    </div>
  );
}
