"""The router's simulator: labelled creative requests (`requests`, drawn from the
phrase, slot and style tables of `phrases`, `slots`, `styles`, `lexicon`,
`lexicon_wide` and `colloquial`), simulated creators with hidden plan preferences and
their route logs (`creators`), and the demo platform the quickstart trains on
(`platform`)."""
