//! `node_indices!`: a node's next nodes or drop reasons declared once, as an enum whose
//! discriminants are the indices the dispatcher and the error counters use and whose `NAMES`
//! are what `next_nodes` / `error_reasons` return, so the two cannot drift apart. Compile-time
//! only; it generates no code on the fast path beyond a constant.

/// Declare an index enum: `node_indices! { pub enum Errors { TooShort = "too-short", ... } }`
/// gives `Errors::TooShort.id() == 0`, `Errors::NAMES == ["too-short", ...]` and
/// `Errors::names()` (owned, for `Node::error_reasons` / `Node::next_nodes`).
#[macro_export]
macro_rules! node_indices {
    ($(#[$m:meta])* $vis:vis enum $name:ident {
        $($(#[$vm:meta])* $variant:ident = $text:expr),+ $(,)?
    }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u16)]
        $vis enum $name {
            $($(#[$vm])* $variant),+
        }

        impl $name {
            /// The names, in index order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// How many there are (the first index after them).
            #[allow(dead_code)]
            pub const COUNT: u16 = Self::NAMES.len() as u16;

            /// The index (a next-node slot or an offset from the node's `error_base`).
            #[inline(always)]
            pub const fn id(self) -> u16 {
                self as u16
            }

            /// The names, owned.
            #[allow(dead_code)]
            pub fn names() -> Vec<String> {
                Self::NAMES.iter().map(|s| s.to_string()).collect()
            }
        }
    };
}

#[cfg(test)]
mod tests {
    node_indices! {
        /// Test reasons.
        enum Reasons {
            /// First.
            First = "first",
            /// Second.
            Second = "second",
        }
    }

    #[test]
    fn ids_follow_the_names() {
        assert_eq!(Reasons::First.id(), 0);
        assert_eq!(Reasons::Second.id(), 1);
        assert_eq!(Reasons::NAMES, ["first", "second"]);
        assert_eq!(Reasons::names(), vec!["first", "second"]);
    }
}
