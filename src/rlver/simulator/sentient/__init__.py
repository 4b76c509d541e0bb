"""The sentient family: an LLM plays the user, appraising each agent reply and answering in character.

``user`` holds the user and its simulator, ``protocols`` the prompt protocols it can speak (one object
each, chosen by name), ``prompts`` their texts, ``parsing`` the answer schemas, and ``spec`` the
``kind: llm`` simulator spec and its builder.
"""
