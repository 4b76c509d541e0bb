"""The offline family: a deterministic, LLM-free simulated user (the demo's and CI's default).

``user`` holds the user and its simulator (vetoes, appraisal, reply), ``lexicon`` the word lists and
text views it reads, ``templates`` its canned lines, ``story`` and ``firstperson`` its profile told in
the first person, ``answers`` how it answers a question from that story, ``learned`` the appraisal
fitted on released Chinese SAGE judgements, ``crosslingual`` the transfer appraisal that carries it to
English, ``data/`` their fitted artefacts, and ``spec`` the ``kind: offline`` simulator spec and its
builder.
"""
