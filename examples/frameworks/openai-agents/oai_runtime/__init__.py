"""An openai-agents 0.24.0 app that delegates in the three ways the SDK's docs teach."""
