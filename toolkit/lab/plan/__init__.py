"""Planning: experiments found and checked (:mod:`.registry`), configs read once and turned
into validated runs (:mod:`.config`). Nothing here runs anything."""
