//! Java enums in JSON: written as their name, read from the name or the ordinal (fastjson
//! accepts both).

/// Declares an enum whose JSON form is the Java constant name; reading also accepts the ordinal.
macro_rules! java_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $java:literal,)* }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            const VARIANTS: &'static [($name, &'static str)] = &[$(($name::$variant, $java),)*];

            /// The Java constant name.
            pub fn as_str(self) -> &'static str {
                Self::VARIANTS.iter().find(|(v, _)| *v == self).map_or("", |(_, n)| *n)
            }

            /// Parses a Java constant name.
            pub fn parse(name: &str) -> Option<Self> {
                Self::VARIANTS.iter().find(|(_, n)| *n == name).map(|(v, _)| *v)
            }

            /// The constant with this ordinal.
            pub fn from_ordinal(ordinal: u64) -> Option<Self> {
                usize::try_from(ordinal).ok().and_then(|i| Self::VARIANTS.get(i)).map(|(v, _)| *v)
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl ::serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " name or ordinal"))
                    }
                    fn visit_str<E: ::serde::de::Error>(self, v: &str) -> Result<$name, E> {
                        $name::parse(v).ok_or_else(|| E::unknown_variant(v, &[$($java,)*]))
                    }
                    fn visit_u64<E: ::serde::de::Error>(self, v: u64) -> Result<$name, E> {
                        $name::from_ordinal(v).ok_or_else(|| E::custom(format!("bad ordinal {v}")))
                    }
                    fn visit_i64<E: ::serde::de::Error>(self, v: i64) -> Result<$name, E> {
                        u64::try_from(v)
                            .ok()
                            .and_then($name::from_ordinal)
                            .ok_or_else(|| E::custom(format!("bad ordinal {v}")))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}
pub(crate) use java_enum;
