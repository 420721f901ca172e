from dataclasses import dataclass
@dataclass(frozen=True)
class Settings:
    x: int = 0
def check(r, study, s): pass
def run(study, priced, ctx, s): raise NotImplementedError
