"""Mistake catalogue of notebook 03 (the position-wise feed-forward network)."""
from . import Alternative, Mistake

ASSIGNMENT = "03_feed_forward"


def _ffn(init_body, forward_body):
    """A FeedForward class with the given __init__ and forward bodies (8-space indented)."""
    return f'''
import torch.nn.functional as F
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
{init_body}
    def forward(self, x):
{forward_body}
'''


STANDARD_INIT = '''        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)'''


def _activation(expr):
    return _ffn(STANDARD_INIT, f"        return self.linear2(self.dropout({expr}))")


MISTAKES = [
    # --- stack_attention ---
    Mistake("stack product in the wrong order", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, combined = x, torch.eye(T, dtype=x.dtype)
    for _ in range(n_layers):
        h, w = scaled_dot_product_attention(h, h, h)
        combined = combined @ w
    return h, combined
''', ("stack_attention_combined",), "wrong order"),
    Mistake("stack combining the layers by attention rollout ((A + I) / 2)", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, combined = x, torch.eye(T, dtype=x.dtype)
    for _ in range(n_layers):
        h, w = scaled_dot_product_attention(h, h, h)
        w = w + torch.eye(T, dtype=x.dtype)
        combined = (w / w.sum(-1, keepdim=True)) @ combined
    return h, combined
''', ("stack_attention_combined",), "attention rollout"),
    Mistake("stack attends over the original x every time", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, combined = x, torch.eye(T, dtype=x.dtype)
    for _ in range(n_layers):
        h, w = scaled_dot_product_attention(x, x, h)
        combined = w @ combined
    return h, combined
''', ("stack_attention_output",), "original x", also=('stack_attention_combined',)),
    Mistake("stack applies one layer, whatever n_layers", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, combined = x, torch.eye(T, dtype=x.dtype)
    for _ in range(n_layers):
        h, w = scaled_dot_product_attention(x, x, x)
        combined = w @ combined
    return h, combined
''', ("stack_attention_output",), "one attention layer only", also=('stack_attention_combined',)),
    Mistake("stack loop one layer short", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, combined = x, torch.eye(T, dtype=x.dtype)
    for _ in range(1, n_layers):
        h, w = scaled_dot_product_attention(h, h, h)
        combined = w @ combined
    return h, combined
''', ("stack_attention_output", "stack_attention_combined"), "one too few"),
    Mistake("stack keeps only the last layer's weights", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, combined = x, torch.eye(T, dtype=x.dtype)
    for _ in range(n_layers):
        h, combined = scaled_dot_product_attention(h, h, h)
    return h, combined
''', ("stack_attention_combined",), "only the last layer"),
    Mistake("stack averages the layers' weights", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, total = x, 0
    for _ in range(n_layers):
        h, w = scaled_dot_product_attention(h, h, h)
        total = total + w
    combined = total / n_layers if n_layers else torch.eye(T, dtype=x.dtype)
    return h, combined
''', ("stack_attention_combined",), "average of the layers' weights"),
    Mistake("stack loop one layer too many", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, combined = x, torch.eye(T, dtype=x.dtype)
    for _ in range(n_layers + 1):
        h, w = scaled_dot_product_attention(h, h, h)
        combined = w @ combined
    return h, combined
''', ("stack_attention_output", "stack_attention_combined"), "one too many"),
    Mistake("stack multiplies the weights entry by entry", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    h, combined = x, torch.ones(T, T, dtype=x.dtype)
    for _ in range(n_layers):
        h, w = scaled_dot_product_attention(h, h, h)
        combined = w * combined
    return h, combined if n_layers else torch.eye(T, dtype=x.dtype)
''', ("stack_attention_combined",), "entry by entry"),
    # --- FeedForward: the nonlinearity ---
    Mistake("FFN without a ReLU", "FeedForward", _activation("self.linear1(x)"),
            ("FeedForward_reference",), "no nonlinearity"),
    Mistake("FFN with a ReLU after linear2 too", "FeedForward",
            _ffn(STANDARD_INIT, "        return torch.relu(self.linear2(self.dropout(torch.relu(self.linear1(x)))))"),
            ("FeedForward_reference",), "also applied after linear2"),
    Mistake("FFN with GELU", "FeedForward", _activation("F.gelu(self.linear1(x))"),
            ("FeedForward_reference",), "GELU"),
    Mistake("FFN with tanh", "FeedForward", _activation("torch.tanh(self.linear1(x))"),
            ("FeedForward_reference",), "tanh"),
    Mistake("FFN with sigmoid", "FeedForward", _activation("torch.sigmoid(self.linear1(x))"),
            ("FeedForward_reference",), "sigmoid"),
    Mistake("FFN with the ReLU on the input", "FeedForward",
            _ffn(STANDARD_INIT, "        return self.linear2(self.dropout(self.linear1(torch.relu(x))))"),
            ("FeedForward_reference",), "applied to the input x"),
    # --- FeedForward: the layers ---
    Mistake("FFN linear layers without bias", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_ff, bias=False)
        self.linear2 = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)''', "        return self.linear2(self.dropout(torch.relu(self.linear1(x))))"),
            ("FeedForward_structure",), "has no bias"),
    Mistake("FFN hidden layer of size d_model", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_model)
        self.linear2 = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)''', "        return self.linear2(self.dropout(torch.relu(self.linear1(x))))"),
            ("FeedForward_structure", "FeedForward_reference"), "must have d_ff units", also=('FeedForward_positionwise', 'FeedForward_dropout')),
    Mistake("FFN with d_model and d_ff swapped", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_ff, d_model)
        self.linear2 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)''', "        return self.linear2(self.dropout(torch.relu(self.linear1(x))))"),
            ("FeedForward_structure", "FeedForward_reference"), "swapped", also=('FeedForward_positionwise', 'FeedForward_dropout')),
    Mistake("FFN with a single linear layer", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)''', "        return self.dropout(torch.relu(self.linear1(x)))"),
            ("FeedForward_structure", "FeedForward_reference"), "single nn.Linear", also=('FeedForward_positionwise', 'FeedForward_dropout')),
    Mistake("FFN layers named fc1 and fc2", "FeedForward", _ffn('''        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)''', "        return self.fc2(self.dropout(torch.relu(self.fc1(x))))"),
            ("FeedForward_structure", "FeedForward_reference"), "named fc1, fc2): name them linear1", also=('FeedForward_positionwise', 'FeedForward_dropout')),
    Mistake("FFN as an nn.Sequential only", "FeedForward", _ffn('''        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(d_ff, d_model))''', "        return self.net(x)"),
            ("FeedForward_structure", "FeedForward_reference"), "linear1", also=('FeedForward_positionwise', 'FeedForward_dropout')),
    Mistake("FFN importing the course reference", "FeedForward", '''
from lib.feed_forward import FeedForward
''', ("FeedForward_reference", "FeedForward_structure", "FeedForward_positionwise"), "not defined", also=('FeedForward_dropout',)),  # lib.feed_forward is not there while 03 is graded
    Mistake("FFN that only takes 3-D input (B, T, d)", "FeedForward", _ffn(STANDARD_INIT, '''        B, T, d = x.shape
        h = self.linear2(self.dropout(torch.relu(self.linear1(x.reshape(B * T, d)))))
        return h.reshape(B, T, d)'''), ("FeedForward_reference",), "acts on the last dimension"),
    # --- FeedForward: positions ---
    Mistake("FFN applied over the sequence dimension", "FeedForward", _ffn(
        STANDARD_INIT,
        "        h = self.linear2(self.dropout(torch.relu(self.linear1(x.transpose(-2, -1)))))\n"
        "        return h.transpose(-2, -1)"),
            ("FeedForward_positionwise", "FeedForward_reference"), "mixes positions", also=('FeedForward_structure', 'FeedForward_dropout'), elsewhere='acts on the last dimension'),
    Mistake("FFN normalizes the hidden units across positions", "FeedForward", _ffn(
        STANDARD_INIT,
        "        h = torch.relu(self.linear1(x))\n"
        "        h = h - h.mean(dim=-2, keepdim=True)\n"
        "        return self.linear2(self.dropout(h))"),
            ("FeedForward_positionwise", "FeedForward_reference"), "changed the outputs at other positions", also=('FeedForward_dropout',), elsewhere='mixes positions'),
    # --- FeedForward: dropout ---
    Mistake("FFN dropout before linear1", "FeedForward",
            _ffn(STANDARD_INIT, "        return self.linear2(torch.relu(self.linear1(self.dropout(x))))"),
            ("FeedForward_dropout",), "applied to the input x, before linear1"),
    Mistake("FFN dropout after linear2", "FeedForward",
            _ffn(STANDARD_INIT, "        return self.dropout(self.linear2(torch.relu(self.linear1(x))))"),
            ("FeedForward_dropout",), "applied to the output of linear2"),
    Mistake("FFN dropout twice: hidden units and output", "FeedForward",
            _ffn(STANDARD_INIT, "        return self.dropout(self.linear2(self.dropout(torch.relu(self.linear1(x)))))"),
            ("FeedForward_dropout",), "dropout is applied twice"),
    Mistake("FFN ignores the dropout argument", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(0.1)''', "        return self.linear2(self.dropout(torch.relu(self.linear1(x))))"),
            ("FeedForward_dropout",), "pass the dropout argument"),
    Mistake("FFN without dropout", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)''', "        return self.linear2(torch.relu(self.linear1(x)))"),
            ("FeedForward_dropout",), "dropout is missing"),
    Mistake("FFN F.dropout still on in eval mode", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.p = dropout''', "        return self.linear2(F.dropout(torch.relu(self.linear1(x)), self.p))"),
            ("FeedForward_dropout",), "eval mode"),
    Mistake("FFN dropout mask without rescaling", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.p = dropout''', '''        h = torch.relu(self.linear1(x))
        if self.training and self.p > 0:
            h = h * (torch.rand_like(h) >= self.p)
        return self.linear2(h)'''),
            ("FeedForward_dropout",), "not multiplied by"),
]

ALTERNATIVES = [
    Alternative("stack with einsum and an expanded identity", "stack_attention", '''
def stack_attention(x, n_layers):
    T = x.shape[-2]
    combined = torch.eye(T, dtype=x.dtype, device=x.device).repeat(*x.shape[:-2], 1, 1)
    h = x
    for _ in range(n_layers):
        w = torch.softmax(torch.einsum("...id,...jd->...ij", h, h) / h.shape[-1] ** 0.5, dim=-1)
        h = torch.einsum("...ij,...jd->...id", w, h)
        combined = torch.einsum("...ij,...jk->...ik", w, combined)
    return h, combined
'''),
    Alternative("stack collecting the weights, then multiplying", "stack_attention", '''
def stack_attention(x, n_layers):
    h, all_weights = x, []
    for _ in range(n_layers):
        h, w = scaled_dot_product_attention(h, h, h)
        all_weights.append(w)
    combined = torch.eye(x.shape[-2], dtype=x.dtype)
    for w in all_weights:
        combined = torch.matmul(w, combined)
    return h, combined
'''),
    Alternative("FFN with F.relu and F.dropout(training=self.training)", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.p = dropout''', "        return self.linear2(F.dropout(F.relu(self.linear1(x)), p=self.p, training=self.training))")),
    Alternative("FFN with nn.ReLU and nn.Dropout modules", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_ff)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(p=dropout)
        self.linear2 = nn.Linear(d_ff, d_model)''', "        return self.linear2(self.drop(self.act(self.linear1(x))))")),
    Alternative("FFN with clamp(min=0)", "FeedForward", _activation("self.linear1(x).clamp(min=0)")),
    Alternative("FFN with dropout before the ReLU", "FeedForward",
                _ffn(STANDARD_INIT, "        return self.linear2(torch.relu(self.dropout(self.linear1(x))))")),
    Alternative("FFN with an nn.Sequential alongside the attributes", "FeedForward", _ffn('''        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.net = nn.Sequential(self.linear1, nn.ReLU(), nn.Dropout(dropout), self.linear2)''',
        "        return self.net(x)")),
    Alternative("FFN whose linear1 and linear2 are the layers of an nn.Sequential built first", "FeedForward", _ffn(
        '''        self.net = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Dropout(dropout),
                                 nn.Linear(d_ff, d_model))
        self.linear1, self.linear2 = self.net[0], self.net[3]''', "        return self.net(x)")),
    Alternative("stack returning the (T, T) identity for n_layers = 0, whatever the batch", "stack_attention", '''
def stack_attention(x, n_layers):
    h, combined = x, None
    for _ in range(n_layers):
        h, w = scaled_dot_product_attention(h, h, h)
        combined = w if combined is None else w @ combined
    if combined is None:
        combined = torch.eye(x.shape[-2], dtype=x.dtype)
    return h, combined
'''),
    Alternative("FFN with explicit matmuls on the linear weights", "FeedForward", _ffn(STANDARD_INIT, '''        h = x @ self.linear1.weight.T + self.linear1.bias
        h = self.dropout(torch.maximum(h, torch.zeros_like(h)))
        return h @ self.linear2.weight.T + self.linear2.bias''')),
]
