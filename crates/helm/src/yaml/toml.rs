//! TOML as BurntSushi's encoder writes it.
