// How a pattern module names its GPU schedules, so that the kernels' instance tables are built
// from the registry's list (layers/patterns/registry.h) and no launcher writes them out.
// A module's .cuh specializes PatternSchedules for its pattern; each schedule there says which
// launches it serves (static bool serves(const Params&), exactly one per launch).
#pragma once
#include "layers/cuda/attention/params.cuh"

namespace flash {

template <class... Schedules>
struct ScheduleList {};

template <class Pattern>
struct PatternSchedules;  // { using type = ScheduleList<...>; bind(Params&, const AttnPattern&) }, in the pattern's .cuh

// What a module's PatternSchedules inherits unless it says otherwise (the launchers ask every
// pattern the same questions, and name none):
struct PatternScheduleDefaults {
    // Binds what a launch with kernel tiles of BM query rows and BN key rows needs beyond bind
    // (block-sparse: its tile lists for that shape).
    static void bind_tiles(Params&, int /*BM*/, int /*BN*/) {}
    // The pattern's parameters for a kernel (AttnPatternArgs's member), with what they hold in
    // host memory put on the device (block-sparse: an explicit layout).
    template <class P>
    static auto device_args(const P& params) { return to_args(params); }
    // The ws launchers' tuning: launch-order groups of whole (b, h) rows sized for the L2
    // (dense_l2_group: rows that each re-read one row's K and V), and the persistent forward
    // at any length (a list's tiles are short whatever the sequence).
    static constexpr bool kL2RowGroups = false, kAlwaysPersistent = false;
};

template <class... Lists>
struct ConcatSchedules;
template <class... A>
struct ConcatSchedules<ScheduleList<A...>> {
    using type = ScheduleList<A...>;
};
template <class... A, class... B, class... Rest>
struct ConcatSchedules<ScheduleList<A...>, ScheduleList<B...>, Rest...> {
    using type = typename ConcatSchedules<ScheduleList<A..., B...>, Rest...>::type;
};

// A schedule as a value (a generic lambda's argument names it by decltype(tag)::type).
template <class Schedule>
struct ScheduleTag {
    using type = Schedule;
};

}  // namespace flash
