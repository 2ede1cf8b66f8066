"""Server-side API: registries, tools, resources, prompts, context and dispatch."""
