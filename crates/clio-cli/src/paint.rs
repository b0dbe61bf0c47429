//! Colour for what a person reads on stderr, decided once per command: `--color always`
//! colours, `--color never` does not, and `auto` (the default) colours a terminal unless
//! `NO_COLOR` is set to anything but the empty string (<https://no-color.org>).
//!
//! Only words that carry a verdict are coloured (a run's status in its closing summary);
//! everything else stays plain, so that a copied line reads the same.

use crate::args::ColorChoice;

/// Whether to colour, and how each verdict is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Paint {
    on: bool,
}

/// What a coloured word says, which picks its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It went well: green.
    Good,
    /// It went wrong: red.
    Bad,
    /// It waits or was cut short: yellow.
    Pending,
}

impl Paint {
    /// Decides from `choice`, whether stderr is a terminal, and `NO_COLOR` as set now.
    pub(crate) fn new(choice: ColorChoice, tty: bool) -> Paint {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Paint::decide(choice, tty, no_color)
    }

    /// Decides from `choice`, whether stderr is a terminal and whether `NO_COLOR` is set.
    pub(crate) fn decide(choice: ColorChoice, tty: bool, no_color: bool) -> Paint {
        let on = match choice {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && !no_color,
        };
        Paint { on }
    }

    /// Returns whether colour is on.
    pub(crate) fn enabled(self) -> bool {
        self.on
    }

    /// Returns `text` coloured for `verdict`, or as it is when colour is off.
    pub(crate) fn word(self, text: &str, verdict: Verdict) -> String {
        if !self.on {
            return text.to_owned();
        }
        let code = match verdict {
            Verdict::Good => "32",
            Verdict::Bad => "31",
            Verdict::Pending => "33",
        };
        format!("\u{1b}[{code}m{text}\u{1b}[0m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_follows_the_flag_the_terminal_and_no_color() {
        let cases = [
            (ColorChoice::Auto, true, false, true),
            (ColorChoice::Auto, true, true, false),
            (ColorChoice::Auto, false, false, false),
            (ColorChoice::Always, false, true, true),
            (ColorChoice::Never, true, false, false),
        ];
        for (choice, tty, no_color, on) in cases {
            let paint = Paint::decide(choice, tty, no_color);
            let word = paint.word("failed", Verdict::Bad);
            assert_eq!(word != "failed", on, "{choice:?} tty {tty} NO_COLOR {no_color}");
        }
        assert_eq!(
            Paint::decide(ColorChoice::Always, false, false).word("ok", Verdict::Good),
            "\u{1b}[32mok\u{1b}[0m"
        );
    }
}
