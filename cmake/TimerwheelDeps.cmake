# TimerwheelDeps.cmake: find what the timerwheel library links against.
#
# Used by the build (CMakeLists.txt) and, installed, by timerwheelConfig.cmake
# (a consumer of the static library needs the same libraries at link time).
#
# Defines, if not defined yet:
#   PkgConfig::TW_CK          Concurrency Kit (pkg-config module `ck`)
#   timerwheel::urcu_common   liburcu-common only (compat_futex_* behind
#                             urcu/futex.h; the wfcqueue code is inlined from
#                             headers with -D_LGPL_SOURCE), with liburcu's
#                             include directories from pkg-config `liburcu`.
#                             `liburcu` itself would also link liburcu.so (the
#                             memb RCU flavour), which we do not use.
#
# tw_find_deps(<REQUIRED|QUIET>) sets TW_DEPS_FOUND.

include_guard(GLOBAL)

macro(tw_find_deps mode)
  set(TW_DEPS_FOUND FALSE)
  find_package(PkgConfig ${mode})
  if(PKG_CONFIG_FOUND)
    if(NOT TARGET PkgConfig::TW_CK)
      pkg_check_modules(TW_CK ${mode} IMPORTED_TARGET ck)
    endif()
    if(NOT TARGET timerwheel::urcu_common)
      pkg_check_modules(TW_URCU ${mode} liburcu)
      if(TW_URCU_FOUND)
        find_library(TW_URCU_COMMON_LIBRARY NAMES urcu-common
                     HINTS ${TW_URCU_LIBRARY_DIRS})
        if(TW_URCU_COMMON_LIBRARY)
          add_library(timerwheel::urcu_common UNKNOWN IMPORTED)
          set_target_properties(timerwheel::urcu_common PROPERTIES
            IMPORTED_LOCATION "${TW_URCU_COMMON_LIBRARY}"
            INTERFACE_INCLUDE_DIRECTORIES "${TW_URCU_INCLUDE_DIRS}"
            INTERFACE_COMPILE_OPTIONS "${TW_URCU_CFLAGS_OTHER}")
        elseif("${mode}" STREQUAL "REQUIRED")
          message(FATAL_ERROR "timerwheel: liburcu-common not found next to liburcu "
                              "(${TW_URCU_LIBRARY_DIRS}); install liburcu-dev")
        endif()
      endif()
    endif()
    if(TARGET PkgConfig::TW_CK AND TARGET timerwheel::urcu_common)
      set(TW_DEPS_FOUND TRUE)
    endif()
  endif()
endmacro()
