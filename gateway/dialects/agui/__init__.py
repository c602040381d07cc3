"""AG-UI 1.0 proper: `/v1/agui/...`, for `HttpAgent` and CopilotKit."""
