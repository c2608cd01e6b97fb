"""The mistake catalogue: common wrong answers, each with the graded cells it
must lose and the words its failure message must contain; and correct
alternatives that must keep full marks. One module per notebook."""
from dataclasses import dataclass


@dataclass
class Mistake:
    name: str
    cell: str          # grade_id of the solution cell the mistake goes in
    code: str          # what the student wrote there
    loses: tuple       # graded cells that must lose points (the first one shows `message`)
    message: str       # words the failure message of loses[0] must contain
    # other parts the same slip breaks, because what they test needs what it gets wrong (a module built wrong cannot
    # be given the comparison's weights, say); with ``loses``, exactly the parts that lose points
    also: tuple = ()
    # words that name the same cause in the messages of loses[1:] where they word it otherwise than ``message``
    elsewhere: str = ""


@dataclass
class Alternative:
    name: str
    cell: str
    code: str
