"""Fifth held-out set, notebook 02: jadore801120/attention-is-all-you-need-pytorch, AllenNLP, OpenNMT-tf,
pytorch/examples (word_language_model), Google BERT (TF), jeonsworld/ViT-pytorch."""
from tests.corpus import Port

ASSIGNMENT = "02_positions"

PORTS = [
    Port(
        "attention-is-all-you-need-pytorch sinusoid table (numpy, 2*(j//2)/d)",
        "jadore801120/attention-is-all-you-need-pytorch, transformer/Models.py: "
        "PositionalEncoding._get_sinusoid_encoding_table (odd d_model check added for the course API)",
        "sinusoidal_positions",
        r'''
import numpy as np


def sinusoidal_positions(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")

    def get_position_angle_vec(position):
        return [position / np.power(10000, 2 * (hid_j // 2) / d_model) for hid_j in range(d_model)]

    sinusoid_table = np.array([get_position_angle_vec(pos_i) for pos_i in range(max_len)]).reshape(max_len, d_model)
    sinusoid_table[:, 0::2] = np.sin(sinusoid_table[:, 0::2])  # dim 2i
    sinusoid_table[:, 1::2] = np.cos(sinusoid_table[:, 1::2])  # dim 2i+1
    return torch.FloatTensor(sinusoid_table)
''',
    ),
    Port(
        "AllenNLP sinusoidal encoding: sines then cosines, log-spaced timescales",
        "allenai/allennlp, modules/transformer/positional_encoding.py: SinusoidalPositionalEncoding "
        "(tensor2tensor-style timescales, torch.cat([sin, cos]); odd widths padded with a zero column)",
        "sinusoidal_positions",
        r'''
def sinusoidal_positions(max_len: int, d_model: int, min_timescale: float = 1.0,
                         max_timescale: float = 1.0e4) -> torch.Tensor:
    num_timescales = d_model // 2
    timestep_range = torch.arange(max_len).float()
    timescale_range = torch.arange(num_timescales).float()
    log_timescale_increments = math.log(float(max_timescale) / float(min_timescale)) / float(num_timescales - 1)
    inverse_timescales = min_timescale * torch.exp(timescale_range * -log_timescale_increments)
    # shape (timesteps, num_timescales)
    scaled_time = timestep_range.unsqueeze(1) * inverse_timescales.unsqueeze(0)
    # shape (timesteps, 2 * num_timescales)
    sinusoids = torch.cat([torch.sin(scaled_time), torch.cos(scaled_time)], 1)
    if d_model % 2 != 0:
        sinusoids = torch.cat([sinusoids, sinusoids.new_zeros(max_len, 1)], 1)
    return sinusoids
''',
        breach="all sines in the first half and all cosines in the second (not interleaved on even/odd dims), and "
               "frequencies spaced by log(10000)/(d/2 - 1) instead of 10000^(-2i/d); an odd d_model is padded "
               "with zeros instead of raising ValueError",
        names=("concat", "halves", "half", "interleav", "layout", "even and odd", "even/odd", "even dim",
               "timescale", "d/2 - 1", "frequenc"),
    ),
    Port(
        "OpenNMT-tf PositionEncoder: positions counted from 1",
        "OpenNMT/OpenNMT-tf, opennmt/layers/position.py: PositionEncoder.call (positions = tf.range(timesteps) + 1, "
        "0 reserved for padding); table from the notebook's sinusoidal_positions",
        "SinusoidalPositions",
        r'''
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        # "The first position is 1 as the 0 index is reserved to padding positions."
        self.register_buffer("pe", sinusoidal_positions(max_len + 1, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        timesteps = x.shape[-2]
        if timesteps > self.max_len:
            raise ValueError(f"sequence length {timesteps} is longer than max_len {self.max_len}")
        positions = torch.arange(timesteps, device=x.device) + 1
        return x + self.pe[positions].to(x.dtype)
''',
        breach="positions start at 1 (OpenNMT reserves 0 for padding): x gets PE[1..T] instead of PE[0..T-1]",
        names=("start at 1", "starts at 1", "from 1", "1-indexed", "one-indexed", "off by one", "off-by-one",
               "shifted", "position 0", "+ 1", "+1"),
    ),
    Port(
        "PyTorch word_language_model PositionalEncoding: sequence-first input",
        "pytorch/examples, word_language_model/model.py: PositionalEncoding (pe of shape (max_len, 1, d_model), "
        "x + pe[:x.size(0)] with x [sequence length, batch size, embed dim]); table from the notebook",
        "SinusoidalPositions",
        r'''
class SinusoidalPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        pe = sinusoidal_positions(max_len, d_model)
        pe = pe.unsqueeze(0).transpose(0, 1)               # (max_len, 1, d_model)
        self.register_buffer("pe", pe)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: [sequence length, batch size, embed dim]
        if x.size(0) > self.max_len:
            raise ValueError(f"sequence length {x.size(0)} is longer than max_len {self.max_len}")
        return x + self.pe[: x.size(0), :].to(x.dtype)
''',
        breach="the input is taken as sequence-first (T, batch, d): for the notebook's (batch, T, d) the position "
               "index runs over the batch dimension (every position of sentence b gets PE[b]), and the length "
               "check looks at the batch size",
        names=("sequence-first", "seq-first", "time-major", "batch_first", "batch first", "first dimension",
               "dim 0", "size(0)", "batch dimension", "batch axis", "over the batch"),
    ),
    Port(
        "Google BERT full_position_embeddings sliced to the sequence",
        "google-research/bert, modeling.py: embedding_postprocessor (truncated-normal 0.02 table "
        "[max_position_embeddings, width], tf.assert_less_equal on the length, tf.slice to seq_length)",
        "LearnedPositions",
        r'''
class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int, initializer_range: float = 0.02):
        super().__init__()
        self.max_len = max_len
        self.full_position_embeddings = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.trunc_normal_(self.full_position_embeddings, std=initializer_range,
                              a=-2 * initializer_range, b=2 * initializer_range)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_length = x.shape[-2]
        if seq_length > self.max_len:   # assert_less_equal(seq_length, max_position_embeddings)
            raise ValueError(f"sequence length {seq_length} is longer than max_len {self.max_len}")
        position_embeddings = self.full_position_embeddings[:seq_length]
        return x + position_embeddings.to(x.dtype)
''',
    ),
    Port(
        "ViT-pytorch position_embeddings initialised to zeros",
        "jeonsworld/ViT-pytorch, models/modeling.py: Embeddings (nn.Parameter(torch.zeros(1, n_patches+1, "
        "hidden_size)), filled only by load_from)",
        "LearnedPositions",
        r'''
class LearnedPositions(nn.Module):
    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        self.max_len = max_len
        self.position_embeddings = nn.Parameter(torch.zeros(1, max_len, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.shape[-2]
        if seq_len > self.max_len:
            raise ValueError(f"sequence length {seq_len} is longer than max_len {self.max_len}")
        return x + self.position_embeddings[0, :seq_len].to(x.dtype)
''',
        breach="the position table starts at zeros (ViT fills it from a checkpoint), not small random values: "
               "untrained, every position gets the same (zero) vector and x comes back unchanged",
        names=("zero", "zeros", "init", "initialis", "initializ", "random", "same vector", "unchanged"),
    ),
]
