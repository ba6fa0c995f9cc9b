"""The token vocabulary: tokenizers and their (de)coding (tokenization.py), the tab tokens' layout and techniques
(tab_tokens.py, tab_techniques.py), the control tokens' registry (controls.py) and what a run saw of them (seen.py),
and the fill tokens (infill.py). Below data/, fingering/ and generation/, which all read it; it imports none of them."""
