"""The ``llm`` simulator kind (SAGE's sentient user): an LLM appraises each reply and answers in character.

``user`` holds the user and its simulator, ``protocols`` the prompt protocols it can speak (one object
each, chosen by name), ``prompts`` their texts, ``parsing`` the answer schemas, and ``spec`` the
``kind: llm`` simulator spec and its builder.
"""
