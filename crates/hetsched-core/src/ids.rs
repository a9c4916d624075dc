//! Typed identities. Every index into the machine model has its own type, so a node number can
//! never be passed where a core number is expected; [`IdVec`] is a table that only its own id
//! type indexes.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// A dense index type: an id that names a row of one table.
pub trait Id: Copy {
    /// The id of row `index`.
    fn from_index(index: usize) -> Self;
    /// The row this id names.
    fn index(self) -> usize;
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as an index into the owning table.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl Id for $name {
            #[inline]
            fn from_index(index: usize) -> Self {
                $name(index as u32)
            }
            #[inline]
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

id_type!(
    /// A core (a logical CPU) of the machine model: a dense index `0..n`. On a live machine the
    /// operating system's CPU number is kept beside it in `Core::os_cpu`.
    CoreId
);
id_type!(
    /// A core class: cores of one class are identical (HASS section 4, "processor class").
    ClassId
);
id_type!(
    /// A module: cores sharing an FPU and an L2, as on AMD Bulldozer (BulldOver section 2).
    ModuleId
);
id_type!(
    /// A last-level-cache domain: the cores sharing one last-level cache.
    LlcId
);
id_type!(
    /// A NUMA node: cores attached to one memory controller (AMPS section 2.4).
    NodeId
);
id_type!(
    /// A thread, unique within one run (a simulation or a live session).
    ThreadId
);
id_type!(
    /// An application (a process): a group of threads sharing an address space.
    AppId
);

/// A table whose rows are named by ids of type `I`: `table[id]` compiles for that id type only.
#[derive(Clone, PartialEq)]
pub struct IdVec<I, T> {
    items: Vec<T>,
    id: PhantomData<fn(I) -> I>,
}

impl<I, T: fmt::Debug> fmt::Debug for IdVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.items.fmt(f)
    }
}

impl<I, T> Default for IdVec<I, T> {
    fn default() -> Self {
        Self::from_vec(Vec::new())
    }
}

impl<I, T> IdVec<I, T> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The table whose row `i` is `items[i]`.
    pub fn from_vec(items: Vec<T>) -> Self {
        Self {
            items,
            id: PhantomData,
        }
    }

    /// Number of rows.
    #[inline]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// No rows.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The rows in id order.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    /// The rows in id order.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    /// The rows in id order, mutable.
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.items.iter_mut()
    }
}

impl<I: Id, T> IdVec<I, T> {
    /// Append a row; returns its id.
    pub fn push(&mut self, item: T) -> I {
        self.items.push(item);
        I::from_index(self.items.len() - 1)
    }

    /// The id the next pushed row will get.
    pub fn next_id(&self) -> I {
        I::from_index(self.items.len())
    }

    /// The row of `id`, if there is one.
    #[inline]
    pub fn get(&self, id: I) -> Option<&T> {
        self.items.get(id.index())
    }

    /// Every id, in order.
    pub fn ids(&self) -> impl DoubleEndedIterator<Item = I> + ExactSizeIterator {
        (0..self.items.len()).map(I::from_index)
    }

    /// (id, row) pairs in id order.
    pub fn iter_enumerated(&self) -> impl DoubleEndedIterator<Item = (I, &T)> + '_ {
        self.items
            .iter()
            .enumerate()
            .map(|(i, x)| (I::from_index(i), x))
    }
}

impl<I: Id, T> Index<I> for IdVec<I, T> {
    type Output = T;
    #[inline]
    fn index(&self, id: I) -> &T {
        &self.items[id.index()]
    }
}

impl<I: Id, T> IndexMut<I> for IdVec<I, T> {
    #[inline]
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.items[id.index()]
    }
}

impl<'a, I, T> IntoIterator for &'a IdVec<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

#[cfg(test)]
mod id_vec_tests {
    use super::*;

    #[test]
    fn push_returns_the_id_that_indexes_the_row() {
        let mut v: IdVec<CoreId, &str> = IdVec::new();
        let a = v.push("a");
        let b = v.push("b");
        assert_eq!((a, b), (CoreId(0), CoreId(1)));
        assert_eq!(v[b], "b");
        v[a] = "z";
        assert_eq!(v.as_slice(), &["z", "b"]);
        assert_eq!(v.ids().collect::<Vec<_>>(), vec![CoreId(0), CoreId(1)]);
        assert_eq!(v.next_id(), CoreId(2));
        assert_eq!(v.get(CoreId(2)), None);
    }
}
